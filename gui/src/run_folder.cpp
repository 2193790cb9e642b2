#include "run_folder.hpp"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

#include "event_stream.hpp"

namespace tandem::gui {

namespace {

constexpr qint64 kTailBytes = 64 * 1024;

}  // namespace

std::optional<bool> engine_running_in(const QString& folder) {
  const QByteArray file = QFile::encodeName(QDir(folder).filePath(".tandem.lock"));
  const int fd = ::open(file.constData(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO: no wait
  if (fd < 0) return std::nullopt;
  struct flock l {};
  l.l_type = F_WRLCK;  // any lock conflicts with a write lock: F_GETLK reports the engine's
  l.l_whence = SEEK_SET;
  const bool held = ::fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

namespace {

// The last epoch_ended event before byte `end` of `file`, looked for in the kBackScanBytes
// before it (a long epoch's batch lines can fill the whole tail); none when not found there.
std::optional<Event> last_epoch_ended_before(QFile& file, qint64 end) {
  constexpr qint64 kBackScanBytes = qint64{8} << 20;
  const qint64 from = std::max<qint64>(0, end - kBackScanBytes);
  file.seek(from);
  const QByteArray bytes = file.read(end - from);
  const qsizetype hit = bytes.lastIndexOf("\"event\":\"epoch_ended\"");
  if (hit < 0) return std::nullopt;
  const qsizetype start = bytes.lastIndexOf('\n', hit) + 1;
  const qsizetype stop = bytes.indexOf('\n', hit);
  EventStreamParser parser;
  const QList<Event> events = parser.feed(bytes.mid(start, stop < 0 ? -1 : stop - start + 1));
  if (events.size() != 1 || events.front().name != "epoch_ended") return std::nullopt;
  return events.front();
}

}  // namespace

RunFolderSummary summarize_run_folder(const QString& path) {
  RunFolderSummary s;
  s.path = QDir(path).absolutePath();
  s.name = QFileInfo(path).fileName();
  QFile file(QDir(path).filePath("events.jsonl"));
  // A stream is a file of its own: a FIFO would block the scan of the workspace.
  if (!QFileInfo(file.fileName()).isFile() || !file.open(QIODevice::ReadOnly)) {
    s.status = "no events";
    return s;
  }
  EventStreamParser head;
  QList<Event> events = head.feed(file.readLine(16 * 1024 * 1024));
  for (const Event& e : events)
    if (e.name == "run_started") {
      s.name = e.fields.value("name").toString(s.name);
      s.started = e.time();
      s.epochs = e.fields.value("config").toObject().value("epochs").toInt();
    }
  const qint64 size = file.size();
  if (size > kTailBytes) {
    file.seek(size - kTailBytes);
    file.readLine();  // the rest of a line cut by the seek
  } else {
    file.seek(0);
  }
  const qint64 tail_start = file.pos();
  EventStreamParser tail;
  events = tail.feed(file.readAll());
  events.append(tail.finish());
  s.status = "incomplete";
  const bool epoch_in_tail = std::any_of(events.begin(), events.end(),
                                         [](const Event& e) { return e.name == "epoch_ended"; });
  if (!epoch_in_tail && tail_start > 0)
    if (const std::optional<Event> last = last_epoch_ended_before(file, tail_start))
      events.prepend(*last);
  for (const Event& e : events) {
    if (e.name == "epoch_started") {
      s.epochs = e.fields.value("epochs").toInt(s.epochs);
    } else if (e.name == "epoch_ended") {
      s.epochs_done = e.fields.value("epoch").toInt();
      s.last_logs = e.fields.value("logs").toObject();
    } else if (e.name == "run_started") {
      s.status = "incomplete";  // a resumed run starts again in the same stream
    } else if (e.name == "run_finished") {
      s.status = e.fields.value("interrupted").toBool() ? "stopped" : "finished";
      s.epochs_done = e.fields.value("epochs_done").toInt(s.epochs_done);
      const QJsonArray history = e.fields.value("history").toArray();
      if (!history.isEmpty() && history.last().isObject()) s.last_logs = history.last().toObject();
    } else if (e.name == "run_failed") {
      s.status = "failed";
      s.error = e.fields.value("error").toString();
    }
  }
  if (s.status != "incomplete") return s;
  // The engine says whether it still runs (its folder lock); an older run folder has no lock,
  // and a stream modified in the last minute is then taken for a run in progress.
  if (const std::optional<bool> running = engine_running_in(path))
    s.status = *running ? "running" : "interrupted";
  else if (QFileInfo(file).lastModified().secsTo(QDateTime::currentDateTime()) < 60)
    s.status = "running";
  return s;
}

QList<RunFolderSummary> scan_workspace(const QString& workspace) {
  QList<RunFolderSummary> runs;
  const QDir dir(workspace);
  // A run folder holds the stream, or at least the config the engine writes before it (a run
  // that failed or was killed before its first event: listed as "no events").
  for (const QFileInfo& entry : dir.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    const QDir folder(entry.absoluteFilePath());
    if (!entry.isReadable() || !entry.isExecutable()) {  // a run or not: it cannot be told
      RunFolderSummary s;
      s.path = entry.absoluteFilePath();
      s.name = entry.fileName();
      s.status = "unreadable";
      s.error = "permission denied";
      runs.push_back(s);
    } else if (QFileInfo::exists(folder.filePath("events.jsonl")) ||
               QFileInfo::exists(folder.filePath("config.json"))) {
      runs.push_back(summarize_run_folder(entry.absoluteFilePath()));
    }
  }
  std::sort(runs.begin(), runs.end(), [](const RunFolderSummary& a, const RunFolderSummary& b) {
    return a.started != b.started ? a.started > b.started : a.path > b.path;
  });
  return runs;
}

}  // namespace tandem::gui
