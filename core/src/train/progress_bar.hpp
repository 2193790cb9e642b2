// A Keras-style progress line on stderr:
//   Epoch 1/5
//   469/469 [==============================] - 2s 4ms/step - loss: 0.4981 - accuracy: 0.8245
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
  ProgressBar(int verbose, std::int64_t total_steps);
  void update(std::int64_t done, const Logs& logs);
  void finish(std::int64_t done, const Logs& logs);

 private:
  std::string line(std::int64_t done, const Logs& logs) const;
  int verbose_;
  std::int64_t total_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tandem
