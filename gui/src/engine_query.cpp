#include "engine_query.hpp"

#include "engine_locator.hpp"

namespace tandem::gui {

EngineQuery::EngineQuery(QObject* parent) : QObject(parent) {
  debounce_.setSingleShot(true);
  connect(&debounce_, &QTimer::timeout, this, &EngineQuery::start);
}

EngineQuery::~EngineQuery() {
  if (process_) {
    process_->disconnect();
    process_->kill();
    process_->waitForFinished(1000);
  }
}

bool EngineQuery::busy() const {
  return debounce_.isActive() || process_ || pending_;
}

void EngineQuery::request(MakeCommand make, int delay_ms) {
  make_ = std::move(make);
  pending_ = true;
  debounce_.start(delay_ms);
}

void EngineQuery::start() {
  if (process_) return;  // the running command's end starts the next one
  pending_ = false;
  const QString engine = engine_path();
  if (engine.isEmpty()) return finish({-1, {}, {}, engine_missing_message()});
  const Command command = make_();
  if (!command.failure.isEmpty()) return finish({-1, {}, {}, command.failure});
  auto* process = new QProcess(this);
  process_ = process;
  connect(process, &QProcess::finished, this, [this, process](int code, QProcess::ExitStatus) {
    EngineAnswer answer{code,
                        process->readAllStandardOutput(),
                        QString::fromUtf8(process->readAllStandardError()),
                        {}};
    process->deleteLater();
    process_ = nullptr;
    finish(answer);
  });
  connect(process, &QProcess::errorOccurred, this, [this, process](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    const QString why = "cannot run the engine: " + process->errorString();
    process->deleteLater();
    process_ = nullptr;
    finish({-1, {}, {}, why});
  });
  process->start(engine, command.arguments);
  if (process_ == process && !command.input.isNull()) {  // (not when it failed to start)
    process->write(command.input);
    process->closeWriteChannel();
  }
}

void EngineQuery::finish(const EngineAnswer& answer) {
  if (pending_) {  // a newer request came while this one ran: its answer is stale
    if (!debounce_.isActive()) start();
    return;
  }
  Q_EMIT answered(answer);
}

}  // namespace tandem::gui
