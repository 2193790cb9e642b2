// libFuzzer target for the event-stream reader of tandem-gui (gui/src/event_stream.cpp) and the
// run model it feeds (gui/src/run_history.cpp): the input is a stream, fed in pieces cut where the
// fuzzer says (as a pipe delivers it), every event applied to a RunHistory, whose series are then
// read as the charts read them. Lines of any shape — not JSON, wrong types, huge or negative
// numbers, events out of order — must be skipped or shown, never crash the dashboard.
#include <fuzzer/FuzzedDataProvider.h>

#include <QByteArray>
#include <QCoreApplication>

#include <cstdint>

#include "event_stream.hpp"
#include "run_history.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  tandem::gui::EventStreamParser parser;
  tandem::gui::RunHistory history;
  while (input.remaining_bytes() > 0) {
    const std::size_t piece = input.ConsumeIntegralInRange<std::size_t>(1, 512);
    const std::string bytes = input.ConsumeBytesAsString(piece);
    history.apply_all(parser.feed(QByteArray(bytes.data(), static_cast<qsizetype>(bytes.size()))));
  }
  history.apply_all(parser.finish());
  if (history.status() == tandem::gui::RunHistory::Status::running)
    history.mark_ended_abnormally("the stream ended");
  (void)history.status_text();
  for (const QString& key : history.metric_names()) {
    (void)history.batch_series(key);
    (void)history.epoch_series(key);
    (void)history.epoch_series("val_" + key);
  }
  for (int r = 0; r < history.replica_labels().size(); ++r) (void)history.replica_step_ms(r);
  for (const QString& d : history.utilisation_devices()) (void)history.utilisation(d);
  (void)history.checkpoints();
  return 0;
}
