#include "progress/progress_bar.hpp"

#include <unistd.h>

#include <cstdio>

namespace tandem {

ProgressBar::ProgressBar(int verbose, std::int64_t total_steps)
    : verbose_(verbose == 1 && !::isatty(STDERR_FILENO) ? 2 : verbose),
      total_(total_steps),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string ProgressBar::line(std::int64_t done, const Logs& logs, double samples_per_sec,
                              bool eta) const {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string bar;
  if (total_ > 0) {
    const int width = 30;
    const int filled = static_cast<int>(width * done / total_);
    bar.reserve(width + 2);
    bar.push_back('[');
    bar.append(static_cast<std::size_t>(filled), '=');
    if (filled < width) bar.push_back('>');
    bar.append(static_cast<std::size_t>(std::max(0, width - filled - 1)), '.');
    bar.push_back(']');
  }
  char head[160];
  const double per_step_ms = done > 0 ? 1000.0 * secs / static_cast<double>(done) : 0.0;
  const std::string total = total_ > 0 ? std::to_string(total_) : "Unknown";  // as Keras
  std::snprintf(head, sizeof head, "%lld/%s %s - %.0fs %.0fms/step", static_cast<long long>(done),
                total.c_str(), bar.c_str(), secs, per_step_ms);
  std::string text = head;
  if (eta && done > 0 && done < total_) {
    const double left = secs / static_cast<double>(done) * static_cast<double>(total_ - done);
    std::snprintf(head, sizeof head, " - ETA %.0fs", left);
    text += head;
  }
  if (samples_per_sec > 0) {
    std::snprintf(head, sizeof head, " - %.0f samples/s", samples_per_sec);
    text += head;
  }
  return text + logs.to_progress_string();
}

void ProgressBar::update(std::int64_t done, const Logs& logs, double samples_per_sec) {
  if (verbose_ != 1) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && (total_ <= 0 || done < total_)) return;
  last_draw_ = now;
  std::fprintf(stderr, "\r%s\033[K", line(done, logs, samples_per_sec, true).c_str());
  std::fflush(stderr);
}

void ProgressBar::finish(std::int64_t done, const Logs& logs, double samples_per_sec) {
  if (verbose_ == 0) return;
  if (total_ <= 0) total_ = done;  // an evaluation's steps are known once it ends
  std::fprintf(stderr, "%s%s\n", verbose_ == 1 ? "\r" : "",
               line(done, logs, samples_per_sec, false).c_str());
  std::fflush(stderr);
}

}  // namespace tandem
