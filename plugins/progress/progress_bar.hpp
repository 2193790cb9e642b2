// A Keras-style progress line on stderr, with throughput and time left:
//   469/469 [==============================] - 2s 4ms/step - 213k samples/s - loss: 0.4981
// verbose 1 redraws the line in place (only when stderr is a terminal, else it acts as 2);
// verbose 2 prints one line per epoch; verbose 0 prints nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "tandem/logs.hpp"

namespace tandem {

class ProgressBar {
 public:
  /// `total_steps` 0: not known beforehand (an evaluation); shown as "Unknown" until finish().
  ProgressBar(int verbose, std::int64_t total_steps);
  /// `samples_per_sec` <= 0 leaves it out. The ETA is shown while the epoch runs.
  void update(std::int64_t done, const Logs& logs, double samples_per_sec = 0);
  void finish(std::int64_t done, const Logs& logs, double samples_per_sec = 0);

 private:
  std::string line(std::int64_t done, const Logs& logs, double samples_per_sec, bool eta) const;
  int verbose_;
  std::int64_t total_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tandem
