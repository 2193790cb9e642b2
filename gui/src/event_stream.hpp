// Reading the engine's event stream (docs/events.md): JSON lines, `"schema": 1`, `"event"`,
// `"time"`.
#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <functional>

namespace tandem::gui {

/// The schema version of docs/events.md this dashboard understands.
inline constexpr int kEventSchema = 1;

/// One event line: its name and the whole object (fields included).
struct Event {
  QString name;
  QJsonObject fields;
  QString time() const { return fields.value("time").toString(); }
};

/// A line that was skipped, with why (1-based line number in the stream).
struct StreamIssue {
  qint64 line = 0;
  QString message;
};

/// Splits a byte stream into events. Lines may arrive in pieces: feed() keeps an incomplete last
/// line until its newline arrives. Lines that are not JSON objects, lack "event", or carry another
/// schema version are skipped and reported in issues(); events with unknown names are returned
/// (readers ignore what they do not know). Not thread-safe; one parser per stream.
class EventStreamParser {
 public:
  /// Appends bytes; returns the events completed by them, in order.
  QList<Event> feed(const QByteArray& bytes);
  /// The stream ended: a pending partial line is dropped (and reported). Returns nothing new
  /// unless the last line was complete JSON without its newline, which is accepted.
  QList<Event> finish();

  const QList<StreamIssue>& issues() const { return issues_; }
  qint64 lines() const { return line_; }

 private:
  void parse_line(const QByteArray& line, QList<Event>& out);

  QByteArray pending_;
  qint64 line_ = 0;
  QList<StreamIssue> issues_;
};

/// Everything in a file (e.g. <run_dir>/events.jsonl), read as the parser reads a stream.
struct EventFile {
  QList<Event> events;  // empty when they were handed to a `take` instead
  qint64 event_count = 0;
  QList<StreamIssue> issues;
  QString error;     // non-empty when the file cannot be read
  qint64 whole = 0;  // bytes up to the end of the last whole line read
};
/// With `whole_lines_only` (a stream an engine is still writing) a last line without its newline
/// is left for a later read from `whole` on, neither applied nor reported. With `take`, the file
/// is read in pieces and each piece's events go to it as they are parsed, none kept (a 200 MB
/// stream held whole as events took 1.4 GB).
EventFile read_event_file(const QString& path, bool whole_lines_only = false,
                          const std::function<void(const QList<Event>&)>& take = {});

}  // namespace tandem::gui
