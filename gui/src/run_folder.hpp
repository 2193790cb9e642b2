// What the Runs panel lists about a run folder, read cheaply from its events.jsonl: the first
// line (run_started) and the last 64 KiB (the end of the run), never the whole stream.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QString>
#include <optional>

namespace tandem::gui {

struct RunFolderSummary {
  QString path;     // the run folder
  QString name;     // from run_started, else the folder name
  QString started;  // UTC, ISO 8601
  // finished, stopped, failed, running, interrupted (its engine is gone without finishing),
  // incomplete (an older run folder whose engine cannot be asked), no events
  QString status;
  int epochs_done = 0;
  int epochs = 0;
  QJsonObject last_logs;  // the last epoch's logs
  QString error;          // run_failed's error
};

/// Whether a `tandem train` process is running in `folder` now: it holds a write lock on the
/// folder's .tandem.lock for the whole run (docs/design.md contract 6); asked with F_GETLK,
/// which takes no lock. nullopt for a folder without the file (a run of an older Tandem).
std::optional<bool> engine_running_in(const QString& folder);

/// Reads a run folder's summary. Never throws; unreadable parts leave fields empty.
RunFolderSummary summarize_run_folder(const QString& path);

/// The run folders directly inside `workspace` (folders holding events.jsonl), newest first.
QList<RunFolderSummary> scan_workspace(const QString& workspace);

}  // namespace tandem::gui
