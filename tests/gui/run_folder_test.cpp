// Run folder summaries (the Runs panel's rows) from events.jsonl: statuses, a long stream read
// only at its ends, and folders that are not runs.
#include <QtTest>

#include <sys/stat.h>

#include "event_stream.hpp"
#include "run_folder.hpp"

using namespace tandem::gui;

namespace {

void write(const QString& path, const QByteArray& bytes) {
  QDir().mkpath(QFileInfo(path).path());
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
  f.write(bytes);
}

QByteArray line(const char* json) {
  return QByteArray(json) + "\n";
}

const char* kStarted =
    R"({"schema":1,"event":"run_started","time":"2026-11-21T08:00:00.000Z","name":"alpha","config":{"epochs":5}})";

}  // namespace

class RunFolderTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;

 private Q_SLOTS:
  void statuses_come_from_the_end_of_the_stream() {
    const QString ws = tmp_.filePath("ws");
    write(
        ws + "/finished/events.jsonl",
        line(kStarted) +
            line(
                R"({"schema":1,"event":"epoch_ended","time":"t","epoch":1,"logs":{"loss":0.5,"val_accuracy":0.8}})") +
            line(
                R"({"schema":1,"event":"run_finished","time":"t","epochs_done":1,"interrupted":false})"));
    write(
        ws + "/stopped/events.jsonl",
        line(kStarted) +
            line(
                R"({"schema":1,"event":"run_finished","time":"t","epochs_done":2,"interrupted":true})"));
    write(
        ws + "/failed/events.jsonl",
        line(kStarted) +
            line(R"({"schema":1,"event":"run_failed","time":"t","error":"the loss became NaN"})"));
    // Killed mid-line, long ago: incomplete.
    write(ws + "/killed/events.jsonl", line(kStarted) + "{\"schema\":1,\"event\":\"batch_en");
    QFile killed(ws + "/killed/events.jsonl");
    QVERIFY(killed.open(QIODevice::ReadWrite));
    QVERIFY(killed.setFileTime(QDateTime::currentDateTime().addSecs(-3600),
                               QFileDevice::FileModificationTime));
    killed.close();
    write(ws + "/not-a-run/notes.txt", "hello");
    // The engine wrote its config, then ended before its first event: a run, with no events.
    write(ws + "/no-stream/config.json", "{}");

    const QList<RunFolderSummary> runs = scan_workspace(ws);
    QCOMPARE(runs.size(), 5);  // not-a-run has neither events.jsonl nor config.json
    QMap<QString, RunFolderSummary> by_folder;
    for (const auto& r : runs) by_folder[QFileInfo(r.path).fileName()] = r;
    QCOMPARE(by_folder["finished"].status, QString("finished"));
    QCOMPARE(by_folder["finished"].name, QString("alpha"));
    QCOMPARE(by_folder["finished"].epochs, 5);
    QCOMPARE(by_folder["finished"].epochs_done, 1);
    QCOMPARE(by_folder["finished"].last_logs.value("val_accuracy").toDouble(), 0.8);
    QCOMPARE(by_folder["stopped"].status, QString("stopped"));
    QCOMPARE(by_folder["failed"].status, QString("failed"));
    QCOMPARE(by_folder["failed"].error, QString("the loss became NaN"));
    QCOMPARE(by_folder["killed"].status, QString("incomplete"));
    QCOMPARE(by_folder["no-stream"].status, QString("no events"));
  }

  void a_stream_being_written_is_running() {
    const QString dir = tmp_.filePath("live");
    write(dir + "/events.jsonl", line(kStarted));
    QCOMPARE(summarize_run_folder(dir).status, QString("running"));
  }

  void the_engines_folder_lock_tells_running_from_interrupted() {
    // An engine holds a write lock (fcntl) on .tandem.lock while it runs; here a stand-in
    // process holds one the same way (Python's fcntl.lockf).
    const QString folder = tmp_.filePath("locked");
    write(folder + "/events.jsonl", line(kStarted));
    write(folder + "/.tandem.lock", "4242\n");
    QProcess holder;
    holder.start("/usr/bin/python3",
                 {"-c",
                  "import fcntl, sys, time\n"
                  "f = open(sys.argv[1], 'r+')\n"
                  "fcntl.lockf(f, fcntl.LOCK_EX)\n"
                  "print('locked', flush=True)\n"
                  "time.sleep(60)\n",
                  folder + "/.tandem.lock"});
    QVERIFY(holder.waitForReadyRead(10000));
    QCOMPARE(holder.readAllStandardOutput().trimmed(), QByteArray("locked"));
    QCOMPARE(engine_running_in(folder), std::optional<bool>(true));
    QCOMPARE(summarize_run_folder(folder).status, QString("running"));
    holder.kill();  // as kill -9 does to an engine: the kernel drops the lock
    QVERIFY(holder.waitForFinished(10000));
    QCOMPARE(engine_running_in(folder), std::optional<bool>(false));
    // The stream is fresh (written a moment ago), yet the run is known to be over.
    QCOMPARE(summarize_run_folder(folder).status, QString("interrupted"));
    // A folder of an older Tandem has no lock: nothing to ask.
    QCOMPARE(engine_running_in(tmp_.filePath("ws/finished")), std::optional<bool>());
  }

  void a_long_stream_is_read_at_its_ends_only() {
    const QString dir = tmp_.filePath("long");
    QByteArray bytes = line(kStarted);
    const QByteArray batch = line(
        R"({"schema":1,"event":"batch_ended","time":"t","epoch":1,"batch":1,"step":1,"size":1,"logs":{"loss":1.0}})");
    while (bytes.size() < 8 * 1024 * 1024) bytes += batch;
    bytes +=
        line(R"({"schema":1,"event":"epoch_ended","time":"t","epoch":5,"logs":{"loss":0.25}})");
    bytes += line(
        R"({"schema":1,"event":"run_finished","time":"t","epochs_done":5,"interrupted":false})");
    write(dir + "/events.jsonl", bytes);
    QElapsedTimer timer;
    timer.start();
    const RunFolderSummary s = summarize_run_folder(dir);
    qInfo("8 MiB stream summarised in %lld ms", static_cast<long long>(timer.elapsed()));
    QCOMPARE(s.status, QString("finished"));
    QCOMPARE(s.name, QString("alpha"));
    QCOMPARE(s.epochs_done, 5);
    QCOMPARE(s.last_logs.value("loss").toDouble(), 0.25);
  }

  // An epoch longer than the tail: its batch lines hide the last epoch_ended (the row said 0
  // epochs and no metrics for a run killed 29 epochs in), found further back; a run_finished's
  // history gives the last epoch's logs.
  void the_last_epoch_is_found_behind_a_long_epochs_batches() {
    const QString dir = tmp_.filePath("long-epoch");
    QByteArray bytes = line(kStarted);
    bytes += line(R"({"schema":1,"event":"epoch_ended","time":"t","epoch":3,"logs":{"loss":0.5}})");
    const QByteArray batch = line(
        R"({"schema":1,"event":"batch_ended","time":"t","epoch":4,"batch":1,"step":1,"size":1,"logs":{"loss":1.0}})");
    while (bytes.size() < 1024 * 1024) bytes += batch;
    write(dir + "/events.jsonl", bytes);
    RunFolderSummary s = summarize_run_folder(dir);
    QCOMPARE(s.epochs_done, 3);
    QCOMPARE(s.last_logs.value("loss").toDouble(), 0.5);
    bytes += line(
        R"({"schema":1,"event":"run_finished","time":"t","epochs_done":3,"interrupted":true,"history":[{"loss":0.7},{"loss":0.6},{"loss":0.5}]})");
    write(dir + "/events.jsonl", bytes);
    s = summarize_run_folder(dir);
    QCOMPARE(s.status, QString("stopped"));
    QCOMPARE(s.epochs_done, 3);
    QCOMPARE(s.last_logs.value("loss").toDouble(), 0.5);
  }

  void garbage_and_missing_streams_do_not_break_the_list() {
    const QString dir = tmp_.filePath("garbage");
    write(dir + "/events.jsonl", QByteArray("\x00\x01\x02 not json\n{\"event\": 3}\n[]\n", 32));
    const RunFolderSummary s = summarize_run_folder(dir);
    QCOMPARE(s.name, QString("garbage"));  // the folder's name when there is no run_started
    QCOMPARE(s.epochs_done, 0);
    QCOMPARE(summarize_run_folder(tmp_.filePath("nothing-here")).status, QString("no events"));
    QVERIFY(scan_workspace(tmp_.filePath("no-such-workspace")).isEmpty());
  }

  // A FIFO where a stream or a lock should be is not waited on (the workspace scan blocked in
  // open() forever); the folder lists as having no events.
  void special_files_in_a_run_folder_do_not_block_the_scan() {
    const QString dir = tmp_.filePath("fifo");
    QVERIFY(QDir().mkpath(dir));
    for (const char* name : {"/events.jsonl", "/.tandem.lock"})
      QCOMPARE(::mkfifo(QFile::encodeName(dir + name).constData(), 0600), 0);
    QCOMPARE(summarize_run_folder(dir).status, QString("no events"));
    QVERIFY(!read_event_file(dir + "/events.jsonl").error.isEmpty());
  }
};

QTEST_GUILESS_MAIN(RunFolderTest)
#include "run_folder_test.moc"
