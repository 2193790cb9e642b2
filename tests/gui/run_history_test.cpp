// RunHistory rebuilt from a recorded stream and from hand-written events.
#include <QtTest>

#include <cmath>

#include "event_stream.hpp"
#include "run_history.hpp"

using namespace tandem::gui;

namespace {

Event make_event(const QByteArray& json) {
  const QJsonObject o = QJsonDocument::fromJson(json).object();
  return {o.value("event").toString(), o};
}

}  // namespace

class RunHistoryTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // A recorded pipelined run (cpu:2, two stages, 4 micro-batches; replica_stats every 5 steps):
  // the pipeline, what each worker held, and one step-time series per stage.
  void pipelined_run_shows_its_stages() {
    const EventFile file =
        read_event_file(QString(TANDEM_GUI_TEST_DATA) + "/pipeline-events.jsonl");
    QVERIFY(file.error.isEmpty());
    RunHistory run;
    run.apply_all(file.events);
    QCOMPARE(run.device_plan(), QString("cpu:2"));
    QCOMPARE(run.pipeline_text(), QString("2 stages × 4 micro-batches (1f1b)"));
    const QStringList placement = run.placement_lines();
    QCOMPARE(placement.size(), 2);
    QVERIFY2(placement[0].startsWith("cpu worker 0 · replica 0 · stage 0: hidden · "),
             qPrintable(placement[0]));
    QVERIFY2(placement[1].startsWith("cpu worker 1 · replica 0 · stage 1: drop, middle, out · "),
             qPrintable(placement[1]));
    QCOMPARE(run.replica_labels(), QStringList({"0/0: cpu worker 0", "0/1: cpu worker 1"}));
    QCOMPARE(run.replica_step_ms(1).size(), 2);  // steps 5 and 10
    QVERIFY(run.replica_step_ms(1)[0].y() > 0);
  }

  // A recorded loss-scaled run (tests/gui/data/loss-scale-events.jsonl: targets near 1000 under
  // mean squared error, initial scale 2^127, growth every 4 good steps): 9 overflows halve the
  // scale down to 2^118, then each doubling overflows again and is taken back.
  void loss_scaled_run_gives_its_scale_and_skipped_steps() {
    const EventFile file =
        read_event_file(QString(TANDEM_GUI_TEST_DATA) + "/loss-scale-events.jsonl");
    QVERIFY(file.error.isEmpty());
    RunHistory run;
    run.apply_all(file.events);
    const QList<QPointF> scale = run.loss_scale_series();
    QCOMPARE(scale.size(), 24);
    QCOMPARE(scale[0], QPointF(1, std::ldexp(1.0, 126)));
    QCOMPARE(scale[8], QPointF(9, std::ldexp(1.0, 118)));
    QCOMPARE(scale[12], QPointF(13, std::ldexp(1.0, 119)));  // doubled after 4 good steps
    QCOMPARE(scale[13], QPointF(14, std::ldexp(1.0, 118)));  // and overflowed again
    QCOMPARE(run.skipped_steps(), 12);
    QCOMPARE(run.loss_scale(), std::optional<double>(std::ldexp(1.0, 118)));
    QCOMPARE(run.epoch_series("loss_scale").size(), 3);
    QVERIFY(!run.metric_names().contains("loss_scale"));
    RunHistory plain;  // a run without loss scaling has none
    plain.apply_all(read_event_file(QString(TANDEM_GUI_TEST_DATA) + "/tiny-events.jsonl").events);
    QVERIFY(!plain.loss_scale().has_value());
    QVERIFY(plain.loss_scale_series().isEmpty());
  }

  void recorded_run_fills_every_series() {
    const EventFile file = read_event_file(QString(TANDEM_GUI_TEST_DATA) + "/tiny-events.jsonl");
    QVERIFY(file.error.isEmpty());
    RunHistory run;
    QSignalSpy updated(&run, &RunHistory::updated);
    run.apply_all(file.events);
    QCOMPARE(updated.count(), 1);
    QCOMPARE(run.name(), QString("tiny"));
    QCOMPARE(run.status(), RunHistory::Status::finished);
    QVERIFY(run.status_text().contains("early_stopping"));
    QCOMPARE(run.epochs(), 3);
    QCOMPARE(run.step(), 48);
    QCOMPARE(run.metric_names(), QStringList({"accuracy", "loss"}));
    QCOMPARE(run.batch_series("loss").size(), 48);
    QCOMPARE(run.batch_series("val_loss").size(), 3);  // at the steps that ended the epochs
    QCOMPARE(run.batch_series("val_loss")[1].x(), 32.0);
    QCOMPARE(run.epoch_series("val_loss").size(), 3);
    QCOMPARE(run.epoch_series("val_loss")[0], QPointF(1, 1.117651941284092));
    QCOMPARE(run.learning_rate_series().size(), 48);
    QCOMPARE(run.samples_per_sec_series().size(), 48);
    QCOMPARE(run.replica_labels(), QStringList({"0: cpu", "1: cpu"}));
    QCOMPARE(run.replica_step_ms(0).size(), 12);  // every 4th of 48 batches
    QCOMPARE(run.checkpoints().size(), 3);
    QVERIFY(run.checkpoints()[0].best);
    QCOMPARE(run.checkpoints()[0].monitor, QString("val_loss"));
    QCOMPARE(run.checkpoints()[2].reason, QString("final"));
    QVERIFY(run.checkpoints()[2].resumable);
  }

  void each_batch_value_is_recovered_from_the_running_means() {
    RunHistory run;
    // Running means over the epoch (Keras): batch 1 has accuracy 10/32, batch 2 12/32, and a
    // last partial batch of 16 samples has 4/16.
    run.apply(make_event(R"({"schema":1,"event":"epoch_started","time":"t","epoch":1,"epochs":1,
                        "steps":3,"resumed_at_batch":0})"));
    run.apply(
        make_event(R"({"schema":1,"event":"batch_ended","time":"t","epoch":1,"batch":1,"step":1,
                        "size":32,"logs":{"accuracy":0.3125,"loss":2.0},"lr":0.1})"));
    run.apply(
        make_event(R"({"schema":1,"event":"batch_ended","time":"t","epoch":1,"batch":2,"step":2,
                        "size":32,"logs":{"accuracy":0.34375,"loss":1.5},"lr":0.1})"));
    run.apply(
        make_event(R"({"schema":1,"event":"batch_ended","time":"t","epoch":1,"batch":3,"step":3,
                        "size":16,"logs":{"accuracy":0.3,"loss":null},"lr":0.05})"));
    const QList<QPointF> acc = run.batch_series("accuracy");
    QCOMPARE(acc.size(), 3);
    QCOMPARE(acc[0], QPointF(1, 0.3125));
    QCOMPARE(acc[1], QPointF(2, 0.375));  // (0.34375·64 − 0.3125·32) / 32
    QCOMPARE(acc[2], QPointF(3, 0.125));  // (0.3·80 − 0.34375·64) / 16 = (24 − 22) / 16
    const QList<QPointF> loss = run.batch_series("loss");
    QCOMPARE(loss.size(), 2);  // a null (non-finite) mean is not drawn
    QCOMPARE(loss[1], QPointF(2, 1.0));
    QCOMPARE(run.learning_rate(), std::optional<double>(0.05));
  }

  void a_new_epoch_starts_its_means_afresh() {
    RunHistory run;
    run.apply(make_event(R"({"schema":1,"event":"epoch_started","time":"t","epoch":1,"steps":1})"));
    run.apply(
        make_event(R"({"schema":1,"event":"batch_ended","time":"t","epoch":1,"batch":1,"step":1,
                        "size":10,"logs":{"loss":4.0}})"));
    run.apply(make_event(R"({"schema":1,"event":"epoch_started","time":"t","epoch":2,"steps":1})"));
    run.apply(
        make_event(R"({"schema":1,"event":"batch_ended","time":"t","epoch":2,"batch":1,"step":2,
                        "size":10,"logs":{"loss":1.0}})"));
    QCOMPARE(run.batch_series("loss")[1], QPointF(2, 1.0));
  }

  void a_resumed_run_continues_the_timeline_from_its_checkpoint() {
    // One stream: steps 1-3 over epochs 1-3, stopped; resumed from the checkpoint of epoch 1
    // (step 1): what came after it gives way, and the series go on from there.
    RunHistory run;
    const auto epoch = [&run](int e, double loss) {
      run.apply(make_event(QString(R"({"schema":1,"event":"epoch_started","time":"t","epoch":%1,"steps":1})")
                               .arg(e).toUtf8()));
      run.apply(make_event(QString(R"({"schema":1,"event":"batch_ended","time":"t","epoch":%1,"batch":1,
                                       "step":%1,"size":10,"logs":{"loss":%2}})")
                               .arg(e).arg(loss).toUtf8()));
      run.apply(make_event(QString(R"({"schema":1,"event":"epoch_ended","time":"t","epoch":%1,
                                       "logs":{"loss":%2,"val_loss":%2}})")
                               .arg(e).arg(loss).toUtf8()));
    };
    run.apply(make_event(R"({"schema":1,"event":"run_started","time":"t","name":"r","config":{"epochs":3}})"));
    epoch(1, 4.0);
    epoch(2, 3.0);
    epoch(3, 2.0);
    run.apply(make_event(R"({"schema":1,"event":"device_stats","time":"t","step":3,
                             "cpu":{"utilization_percent":90}})"));
    run.apply(make_event(R"({"schema":1,"event":"checkpoint_saved","time":"t","epoch":3,"step":3,
                             "path":"/r/model.h5","trigger":"interrupted"})"));
    QCOMPARE(run.markers().size(), 1);
    run.apply(make_event(R"({"schema":1,"event":"run_started","time":"t","name":"r","config":{"epochs":3}})"));
    // Resumed into epoch 2: the last epoch shown is epoch 1 again, not the abandoned epoch 3
    // (the header kept its values), before any batch of the resumed timeline.
    run.apply(make_event(R"({"schema":1,"event":"epoch_started","time":"t","epoch":2,"steps":1})"));
    QCOMPARE(run.last_epoch_logs().value("val_loss").toDouble(), 4.0);
    epoch(2, 2.5);
    // The abandoned timeline's utilisation and markers go too.
    QVERIFY(run.utilisation("cpu").isEmpty());
    QVERIFY(run.markers().isEmpty());
    QCOMPARE(run.batch_series("loss"), (QList<QPointF>{{1, 4.0}, {2, 2.5}}));
    QCOMPARE(run.epoch_series("loss"), (QList<QPointF>{{1, 4.0}, {2, 2.5}}));
    QCOMPARE(run.epoch_series("val_loss"), (QList<QPointF>{{1, 4.0}, {2, 2.5}}));
    epoch(3, 1.5);
    QCOMPARE(run.epoch_series("loss").size(), 3);
    QCOMPARE(run.epoch_series("loss").back(), QPointF(3, 1.5));
  }

  void failed_and_abnormal_ends() {
    RunHistory failed;
    failed.apply(make_event(R"({"schema":1,"event":"run_started","time":"t","name":"x"})"));
    failed.apply(
        make_event(R"({"schema":1,"event":"run_failed","time":"t","error":"loss is NaN"})"));
    QCOMPARE(failed.status(), RunHistory::Status::failed);
    QCOMPARE(failed.status_text(), QString("failed: loss is NaN"));
    failed.mark_ended_abnormally("ignored: the run already ended");
    QCOMPARE(failed.error(), QString("loss is NaN"));

    RunHistory crashed;
    crashed.apply(make_event(R"({"schema":1,"event":"run_started","time":"t","name":"x"})"));
    QCOMPARE(crashed.status(), RunHistory::Status::running);
    crashed.mark_ended_abnormally("the engine crashed");
    QCOMPARE(crashed.status(), RunHistory::Status::failed);

    RunHistory stopped;
    stopped.apply(make_event(
        R"({"schema":1,"event":"stopped","time":"t","reason":"interrupted by a signal"})"));
    stopped.apply(
        make_event(R"({"schema":1,"event":"run_finished","time":"t","interrupted":true})"));
    QCOMPARE(stopped.status_text(), QString("stopped: interrupted by a signal"));

    // A resume that fails starts from the stream of a finished run: the engine's failure still
    // makes it failed, with this engine's error (it used to stay "finished").
    RunHistory resumed;
    resumed.apply(make_event(R"({"schema":1,"event":"run_started","time":"t","name":"x"})"));
    resumed.apply(make_event(R"({"schema":1,"event":"run_finished","time":"t"})"));
    resumed.mark_ended_abnormally("ignored: the stream says it finished");
    QCOMPARE(resumed.status(), RunHistory::Status::finished);
    resumed.mark_failed("nothing is left to train");
    QCOMPARE(resumed.status(), RunHistory::Status::failed);
    QCOMPARE(resumed.error(), QString("nothing is left to train"));

    // A diverged run fails after saving the step before: that checkpoint resumes (an engine's
    // event says so; an older stream's reason alone does too).
    RunHistory diverged;
    diverged.apply_all({
        make_event(R"({"event": "run_started", "run_dir": "/r", "config": {"epochs": 3}})"),
        make_event(R"({"event": "checkpoint_saved", "path": "/r/model.h5", "epoch": 1,
                       "step": 3, "reason": "diverged"})"),
        make_event(R"({"event": "run_failed", "error": "the loss became NaN"})"),
    });
    QCOMPARE(diverged.status(), RunHistory::Status::failed);
    QVERIFY(diverged.checkpoints()[0].resumable);
  }

  // A run folder copied or moved elsewhere: its checkpoints are the ones inside it, not the
  // paths the stream recorded in the original folder.
  void a_relocated_run_points_at_its_own_checkpoints() {
    RunHistory run;
    run.apply_all({
        make_event(R"({"event": "run_started", "run_dir": "/old/run", "config": {"epochs": 1}})"),
        make_event(R"({"event": "checkpoint_saved", "path": "/old/run/checkpoints/e1.h5",
                       "epoch": 1, "step": 3})"),
        make_event(R"({"event": "checkpoint_saved", "path": "/elsewhere/e1.h5", "epoch": 1,
                       "step": 3})"),
    });
    run.relocate("/new/copy");
    QCOMPARE(run.run_dir(), QString("/new/copy"));
    QCOMPARE(run.checkpoints()[0].path, QString("/new/copy/checkpoints/e1.h5"));
    QCOMPARE(run.checkpoints()[1].path, QString("/elsewhere/e1.h5"));  // not inside the run
  }

  void device_stats_give_utilisation_per_device() {
    RunHistory run;
    run.apply(make_event(R"({"schema":1,"event":"device_stats","time":"t","step":10,
                        "cpu":{"utilization_percent":null,"memory_used_bytes":1},"gpus":[]})"));
    QVERIFY(run.utilisation_devices().isEmpty());  // the first CPU sample is unknown
    run.apply(make_event(R"({"schema":1,"event":"device_stats","time":"t","step":20,
                        "cpu":{"utilization_percent":55.5},
                        "gpus":[{"index":1,"utilization_percent":97},{"index":0,"utilization_percent":null}]})"));
    QCOMPARE(run.utilisation_devices(), QStringList({"cpu", "cuda:1"}));
    QCOMPARE(run.utilisation("cpu"), QList<QPointF>({{20, 55.5}}));
    QCOMPARE(run.utilisation("cuda:1"), QList<QPointF>({{20, 97}}));
  }

  // Checkpoints and callback decisions become markers (step, epoch, one line each), announced
  // one by one with marker_added.
  void callback_decisions_become_markers() {
    RunHistory run;
    QSignalSpy added(&run, &RunHistory::marker_added);
    run.apply_all({
        make_event(R"({"event": "run_started", "config": {"epochs": 5}})"),
        make_event(R"({"event": "epoch_started", "epoch": 1, "epochs": 5, "steps": 10})"),
        make_event(R"({"event": "batch_ended", "epoch": 1, "batch": 10, "step": 10, "size": 4,
                       "logs": {"loss": 1.0}})"),
        make_event(R"({"event": "batch_ended", "epoch": 2, "batch": 2, "step": 12, "size": 4,
                       "logs": {"loss": 1.0}})"),
        // Published two batches after it was saved at step 10: marked at 10.
        make_event(R"({"event": "checkpoint_saved", "path": "/r/ckpt/epoch01.h5", "epoch": 1,
                       "step": 10, "monitor": "val_loss", "value": 0.5, "best": true})"),
        make_event(R"({"event": "reduce_lr_on_plateau", "epoch": 1, "monitor": "val_loss",
                       "value": 0.5, "old_lr": 0.001, "new_lr": 0.0005})"),
        make_event(R"({"event": "early_stopping", "action": "stop", "epoch": 1,
                       "message": "val_loss did not improve for 2 epochs"})"),
        make_event(R"({"event": "early_stopping", "action": "restore_best_weights",
                       "monitor": "val_loss", "best": 0.25, "best_epoch": 1})"),
        make_event(R"({"event": "stopped", "reason": "early_stopping: done", "epoch": 1})"),
    });
    const QList<RunMarker> markers = run.markers();
    QCOMPARE(markers.size(), 5);
    QCOMPARE(added.count(), 5);
    QCOMPARE(markers[0].step, 10);
    for (int i : {0, 1, 2, 4}) QCOMPARE(markers[i].epoch, 1);
    QCOMPARE(markers[3].epoch, 2);  // restore_best_weights names no epoch: where the run is
    for (qsizetype i = 1; i < markers.size(); ++i) QCOMPARE(markers[i].step, 12);  // no step
    QCOMPARE(markers[0].kind, QString("checkpoint_saved"));
    QCOMPARE(markers[0].text, QString("checkpoint epoch01.h5 (val_loss 0.5, best)"));
    QCOMPARE(markers[1].text,
             QString("reduce_lr_on_plateau: learning rate 0.001 → 0.0005 (val_loss 0.5)"));
    QCOMPARE(markers[2].text,
             QString("early_stopping: stop — val_loss did not improve for 2 epochs"));
    QCOMPARE(markers[3].text,
             QString("early_stopping: restored the weights of epoch 1 (val_loss 0.25)"));
    QCOMPARE(markers[4].text, QString("stopped: early_stopping: done"));
  }

  // ETA: from the batches' pace within the first epoch, then from whole epochs (validation
  // included); none once the run is over.
  void the_eta_follows_the_pace_of_the_run() {
    RunHistory run;
    QList<Event> events = {
        make_event(R"({"event": "run_started", "config": {"epochs": 4}})"),
        make_event(R"({"event": "epoch_started", "epoch": 1, "epochs": 4, "steps": 10})")};
    QVERIFY(!run.eta_seconds());
    for (int b = 1; b <= 5; ++b)
      events << make_event(QString(R"({"event": "batch_ended", "time": "2026-11-27T10:00:%1.000Z",
                                       "epoch": 1, "batch": %2, "step": %2, "size": 1,
                                       "logs": {"loss": 1.0}})")
                               .arg(2 * b, 2, 10, QChar('0'))
                               .arg(b)
                               .toUtf8());
    run.apply_all(events);
    // 4 batches in 8 s: 2 s a batch, 35 batches left.
    QVERIFY(run.eta_seconds());
    QCOMPARE(*run.eta_seconds(), 70.0);
    run.apply_all({make_event(R"({"event": "batch_ended", "time": "2026-11-27T10:00:30.000Z",
                                  "epoch": 1, "batch": 10, "step": 10, "size": 1,
                                  "logs": {"loss": 1.0}})"),
                   make_event(R"({"event": "epoch_ended", "epoch": 1, "seconds": 50,
                                  "logs": {"loss": 1.0}})")});
    // An epoch took 50 s with its validation: 3 epochs left.
    QCOMPARE(*run.eta_seconds(), 150.0);
    run.apply(make_event(R"({"event": "run_finished", "interrupted": false})"));
    QVERIFY(!run.eta_seconds());
    // A resumed segment whose first epoch ran its last 5 of 10 batches in 25 s: a whole epoch
    // takes 50 s at that pace (it used to count 25 s, an ETA half the time left).
    run.apply_all({make_event(R"({"event": "run_started", "config": {"epochs": 4}})"),
                   make_event(R"({"event": "epoch_started", "epoch": 2, "epochs": 4,
                                  "steps": 10, "resumed_at_batch": 5})"),
                   make_event(R"({"event": "batch_ended", "time": "2026-11-27T10:01:30.000Z",
                                  "epoch": 2, "batch": 10, "step": 20, "size": 1,
                                  "logs": {"loss": 1.0}})"),
                   make_event(R"({"event": "epoch_ended", "epoch": 2, "seconds": 25,
                                  "logs": {"loss": 1.0}})")});
    QVERIFY(run.eta_seconds());
    QCOMPARE(*run.eta_seconds(), 100.0);  // 2 epochs left at 50 s
    QCOMPARE(format_duration(45.4), QString("45 s"));
    QCOMPARE(format_duration(252), QString("4 min 12 s"));
    QCOMPARE(format_duration(7500), QString("2 h 05 min"));
  }

  // Wall time since the run first started, per step: each step at the time its batch ended,
  // interpolated between batches; a resumed run continues the clock (its pause included).
  void steps_map_to_wall_time_since_the_first_start() {
    RunHistory run;
    auto batch = [](int step, const char* time) {
      return make_event(QString(R"({"event": "batch_ended", "time": "%1", "epoch": 1,
                                    "batch": %2, "step": %2, "size": 1, "logs": {"loss": 1.0}})")
                            .arg(time)
                            .arg(step)
                            .toUtf8());
    };
    QVERIFY(run.at_wall_time({{1, 0.5}}).isEmpty());  // no batch yet: no clock
    run.apply_all({make_event(R"({"event": "run_started", "time": "2026-11-27T10:00:00.000Z"})"),
                   batch(1, "2026-11-27T10:00:01.000Z"), batch(2, "2026-11-27T10:00:02.000Z"),
                   batch(3, "2026-11-27T10:00:04.000Z")});
    QCOMPARE(run.at_wall_time({{1, 0.5}, {2.5, 0.6}, {3, 0.7}, {0, 0.8}, {9, 0.9}}),
             QList<QPointF>({{1, 0.5}, {3, 0.6}, {4, 0.7}, {1, 0.8}, {4, 0.9}}));
    QCOMPARE(run.elapsed_seconds(), 4.0);
    // Resumed 96 s later from the checkpoint at step 2: step 3 again, on the same clock.
    run.apply_all({make_event(R"({"event": "run_started", "time": "2026-11-27T10:01:40.000Z"})"),
                   batch(3, "2026-11-27T10:01:41.500Z")});
    QCOMPARE(run.at_wall_time({{3, 0.7}}), QList<QPointF>({{101.5, 0.7}}));
    QCOMPARE(run.elapsed_seconds(), 101.5);
  }

  void unknown_events_change_nothing_but_the_revision() {
    RunHistory run;
    const qint64 before = run.revision();
    run.apply(make_event(R"({"schema":1,"event":"something_new","time":"t","loss":3})"));
    QCOMPARE(run.revision(), before + 1);
    QVERIFY(run.metric_names().isEmpty());
    QCOMPARE(run.status(), RunHistory::Status::waiting);
  }
};

QTEST_GUILESS_MAIN(RunHistoryTest)
#include "run_history_test.moc"
