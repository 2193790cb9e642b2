// The event-stream parser on a recorded engine stream and on malformed input.
#include <QtTest>

#include "event_stream.hpp"

using namespace tandem::gui;

class EventStreamTest : public QObject {
  Q_OBJECT
 private:
  static QByteArray recorded() {
    QFile f(QString(TANDEM_GUI_TEST_DATA) + "/tiny-events.jsonl");
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot read the recorded stream");
    return f.readAll();
  }

 private Q_SLOTS:
  void recorded_stream_parses_completely() {
    EventStreamParser parser;
    QList<Event> events = parser.feed(recorded());
    events.append(parser.finish());
    QVERIFY(parser.issues().isEmpty());
    QCOMPARE(events.size(), 73);
    QCOMPARE(events.front().name, QString("run_started"));
    QCOMPARE(events.back().name, QString("run_finished"));
    int batches = 0, epochs = 0, checkpoints = 0;
    for (const Event& e : events) {
      batches += e.name == "batch_ended";
      epochs += e.name == "epoch_ended";
      checkpoints += e.name == "checkpoint_saved";
      QVERIFY(!e.time().isEmpty());
    }
    QCOMPARE(batches, 48);  // 3 epochs of 512 samples at batch 32
    QCOMPARE(epochs, 3);
    QCOMPARE(checkpoints, 3);  // two from the checkpoint plugin, the final model.h5
  }

  void bytes_arriving_one_at_a_time_give_the_same_events() {
    const QByteArray all = recorded();
    EventStreamParser whole;
    const QList<Event> expected = whole.feed(all);
    EventStreamParser pieces;
    QList<Event> got;
    for (qsizetype i = 0; i < all.size(); i += 7) got.append(pieces.feed(all.mid(i, 7)));
    got.append(pieces.finish());
    QCOMPARE(got.size(), expected.size());
    for (qsizetype i = 0; i < got.size(); ++i) QCOMPARE(got[i].fields, expected[i].fields);
  }

  void partial_last_line_is_skipped_and_reported() {
    EventStreamParser parser;
    QList<Event> events = parser.feed(
        "{\"schema\":1,\"event\":\"epoch_started\",\"time\":\"t\",\"epoch\":1}\n"
        "{\"schema\":1,\"event\":\"batch_ended\",\"time\":\"t\",\"lo");
    QCOMPARE(events.size(), 1);
    QVERIFY(parser.issues().isEmpty());  // the second line may still be completed
    QCOMPARE(parser.finish().size(), 0);
    QCOMPARE(parser.issues().size(), 1);
    QCOMPARE(parser.issues().front().line, 2);
    QVERIFY(parser.issues().front().message.contains("partial last line"));
  }

  void complete_last_line_without_newline_is_accepted() {
    EventStreamParser parser;
    QCOMPARE(parser.feed("{\"schema\":1,\"event\":\"run_finished\",\"time\":\"t\"}").size(), 0);
    const QList<Event> events = parser.finish();
    QCOMPARE(events.size(), 1);
    QCOMPARE(events.front().name, QString("run_finished"));
  }

  void unknown_events_are_passed_on_without_complaint() {
    EventStreamParser parser;
    const QList<Event> events =
        parser.feed("{\"schema\":1,\"event\":\"my_plugin_event\",\"time\":\"t\",\"x\":3}\n");
    QCOMPARE(events.size(), 1);
    QCOMPARE(events.front().name, QString("my_plugin_event"));
    QCOMPARE(events.front().fields.value("x").toInt(), 3);
    QVERIFY(parser.issues().isEmpty());
  }

  void other_schema_versions_are_refused_with_the_reason() {
    EventStreamParser parser;
    const QList<Event> events = parser.feed(
        "{\"schema\":2,\"event\":\"batch_ended\",\"time\":\"t\"}\n"
        "{\"event\":\"batch_ended\",\"time\":\"t\"}\n"
        "{\"schema\":\"1\",\"event\":\"batch_ended\",\"time\":\"t\"}\n");
    QCOMPARE(events.size(), 0);
    QCOMPARE(parser.issues().size(), 3);
    QVERIFY(parser.issues()[0].message.contains("schema 2 is not supported"));
    QVERIFY(parser.issues()[0].message.contains("schema 1"));
    QVERIFY(parser.issues()[1].message.contains("schema none"));
    QVERIFY(parser.issues()[2].message.contains("not a number"));
  }

  void garbage_lines_are_skipped_and_the_stream_goes_on() {
    EventStreamParser parser;
    const QList<Event> events = parser.feed(
        "not json at all\n"
        "[1,2,3]\n"
        "\n"
        "{\"schema\":1,\"time\":\"t\"}\n"
        "{\"schema\":1,\"event\":\"\",\"time\":\"t\"}\n"
        "\x01\x02\xff\n"
        "{\"schema\":1,\"event\":\"run_finished\",\"time\":\"t\"}\n");
    QCOMPARE(events.size(), 1);
    QCOMPARE(events.front().name, QString("run_finished"));
    QCOMPARE(parser.issues().size(), 5);  // the blank line is not an issue
    QCOMPARE(parser.issues()[0].line, 1);
    QVERIFY(parser.issues()[0].message.startsWith("not JSON"));
    QVERIFY(parser.issues()[1].message.contains("not a JSON object"));
    QVERIFY(parser.issues()[2].message.contains("no \"event\""));
    QCOMPARE(parser.issues()[4].line, 6);
  }

  // A stream longer than the pieces it is read in: the same events whether kept or handed over
  // piece by piece (none kept then), and an engine's unfinished last line left for later.
  void a_long_file_is_read_in_pieces() {
    QTemporaryDir dir;
    const QString path = dir.filePath("events.jsonl");
    const QByteArray line =
        R"({"schema":1,"event":"batch_ended","time":"t","epoch":1,"batch":1,"step":1,"size":1,"logs":{"loss":1.0}})"
        "\n";
    QByteArray bytes;
    while (bytes.size() < 20 * 1024 * 1024) bytes += line;
    const qint64 lines = bytes.size() / line.size();
    const QByteArray partial = "{\"schema\":1,\"event\":\"batch_en";  // no raw string: moc
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes + partial);
    f.close();
    const EventFile kept = read_event_file(path);
    QCOMPARE(kept.events.size(), lines);
    QCOMPARE(kept.issues.size(), 1);  // the cut last line
    qint64 taken = 0;
    const EventFile handed = read_event_file(
        path, true, [&taken](const QList<Event>& events) { taken += events.size(); });
    QCOMPARE(taken, lines);
    QCOMPARE(handed.event_count, lines);
    QVERIFY(handed.events.isEmpty());
    QVERIFY(handed.issues.isEmpty());  // an engine still writes it: not reported
    QCOMPARE(handed.whole, static_cast<qint64>(bytes.size()));
  }

  void read_event_file_reports_a_missing_file() {
    const EventFile file = read_event_file("/nonexistent/events.jsonl");
    QVERIFY(file.error.contains("/nonexistent/events.jsonl"));
    QVERIFY(file.events.isEmpty());
  }
};

QTEST_GUILESS_MAIN(EventStreamTest)
#include "event_stream_test.moc"
