#include "event_stream.hpp"

#include <algorithm>

#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonParseError>

namespace tandem::gui {

QList<Event> EventStreamParser::feed(const QByteArray& bytes) {
  QList<Event> out;
  pending_.append(bytes);
  qsizetype start = 0;
  while (true) {
    const qsizetype newline = pending_.indexOf('\n', start);
    if (newline < 0) break;
    parse_line(pending_.mid(start, newline - start), out);
    start = newline + 1;
  }
  pending_.remove(0, start);
  return out;
}

QList<Event> EventStreamParser::finish() {
  QList<Event> out;
  if (pending_.trimmed().isEmpty()) {
    pending_.clear();
    return out;
  }
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(pending_, &error);
  if (error.error == QJsonParseError::NoError && doc.isObject()) {
    parse_line(pending_, out);
  } else {
    ++line_;
    issues_.push_back({line_, "partial last line skipped (the engine stopped while writing it)"});
  }
  pending_.clear();
  return out;
}

void EventStreamParser::parse_line(const QByteArray& raw, QList<Event>& out) {
  ++line_;
  const QByteArray line = raw.trimmed();
  if (line.isEmpty()) return;
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(line, &error);
  if (error.error != QJsonParseError::NoError) {
    issues_.push_back({line_, "not JSON (" + error.errorString() + " at byte " +
                                  QString::number(error.offset) + ")"});
    return;
  }
  if (!doc.isObject()) {
    issues_.push_back({line_, "not a JSON object"});
    return;
  }
  const QJsonObject object = doc.object();
  const QJsonValue schema = object.value("schema");
  if (!schema.isDouble() || schema.toDouble() != kEventSchema) {
    const QString seen = schema.isUndefined() ? QString("none")
                         : schema.isDouble()  ? QString::number(schema.toDouble())
                                              : QString("not a number");
    issues_.push_back({line_, QString("event schema %1 is not supported (this dashboard reads "
                                      "schema %2); update tandem-gui")
                                  .arg(seen)
                                  .arg(kEventSchema)});
    return;
  }
  const QJsonValue name = object.value("event");
  if (!name.isString() || name.toString().isEmpty()) {
    issues_.push_back({line_, "no \"event\" name"});
    return;
  }
  out.push_back({name.toString(), object});
}

EventFile read_event_file(const QString& path, bool whole_lines_only,
                          const std::function<void(const QList<Event>&)>& take) {
  EventFile result;
  // A stream is a file of its own: a FIFO would block the GUI, a device never end.
  if (!QFileInfo(path).isFile()) {
    result.error = QString("cannot read %1: not a regular file").arg(path);
    return result;
  }
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    result.error = QString("cannot read %1: %2").arg(path, file.errorString());
    return result;
  }
  EventStreamParser parser;
  const auto hand_over = [&](QList<Event> events) {
    result.event_count += events.size();
    if (take)
      take(events);
    else
      result.events.append(std::move(events));
  };
  constexpr qint64 kPiece = qint64{8} << 20;
  while (true) {
    QByteArray bytes = file.read(kPiece);
    if (bytes.isEmpty()) break;
    const qint64 start = file.pos() - bytes.size();
    if (const qsizetype newline = bytes.lastIndexOf('\n'); newline >= 0)
      result.whole = start + newline + 1;
    if (whole_lines_only && file.atEnd()) bytes.truncate(std::max<qint64>(0, result.whole - start));
    hand_over(parser.feed(bytes));
  }
  if (!whole_lines_only) hand_over(parser.finish());
  result.issues = parser.issues();
  return result;
}

}  // namespace tandem::gui
