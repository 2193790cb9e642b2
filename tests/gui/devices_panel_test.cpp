// DeviceMonitor, DevicesPanel and the device snapshot parser: against the real engine (on a
// machine without a GPU), recorded engine output with fake GPUs, garbage, and broken engines.
#include <QByteArray>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QPointer>
#include <QProgressBar>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "device_monitor.hpp"
#include "device_snapshot.hpp"
#include "devices_panel.hpp"
#include "engine_locator.hpp"

using tandem::gui::DeviceMonitor;
using tandem::gui::DeviceSnapshot;
using tandem::gui::DevicesPanel;

namespace {

// One line of `tandem devices --json --watch` on a two-GPU machine, with the engine's exact field
// names (see core/src/parallel/device_registry.cpp, to_json). GPU 1 has no NVML readings for
// utilisation, memory and power, and runs hot.
const QByteArray kTwoGpus =
    R"({"cpu":{"device":"cpu","logical_cores":64,)"
    R"("memory_bytes":270582939648,"model_name":"AMD EPYC 7B13"},)"
    R"("cuda":{"built":true,"driver_version":12040,"runtime_version":13000,)"
    R"("status":""},"gpus":[)"
    R"({"compute_capability":"9.0","device":"cuda:0","index":0,)"
    R"("memory_bytes":85520809984,"multiprocessors":132,)"
    R"("name":"NVIDIA H100 80GB HBM3","pci_bus_id":"0000:3b:00.0"},)"
    R"({"compute_capability":"9.0","device":"cuda:1","index":1,)"
    R"("memory_bytes":85520809984,"multiprocessors":132,)"
    R"("name":"NVIDIA H100 80GB HBM3","pci_bus_id":"0000:5b:00.0"}],)"
    R"("sample":{"cpu":{"memory_available_bytes":200000000000,)"
    R"("memory_used_bytes":70582939648,"utilization_percent":37.5},)"
    R"("gpus":[{"device":"cuda:0","index":0,)"
    R"("memory_used_bytes":42949672960,"power_w":312.4,)"
    R"("temperature_c":64.0,"utilization_percent":87.0},)"
    R"({"device":"cuda:1","index":1,"memory_used_bytes":null,)"
    R"("power_w":null,"temperature_c":86.0,"utilization_percent":null}],)"
    R"("nvml_status":"","time":"2026-11-21T08:21:46.084Z"}})";

// The same machine a second later: new readings, same GPUs.
QByteArray two_gpus_later() {
  QByteArray line = kTwoGpus;
  line.replace(R"("temperature_c":64.0,"utilization_percent":87.0)",
               R"("temperature_c":81.0,"utilization_percent":12.0)");
  return line;
}

// The machine with GPU 1 gone (e.g. CUDA_VISIBLE_DEVICES changed between engine runs).
const QByteArray kOneGpu = R"({"cpu":{"device":"cpu","logical_cores":64,)"
                           R"("memory_bytes":270582939648,"model_name":"AMD EPYC 7B13"},)"
                           R"("cuda":{"built":true,"driver_version":12040,)"
                           R"("runtime_version":13000,"status":""},"gpus":[)"
                           R"({"compute_capability":"9.0","device":"cuda:0","index":0,)"
                           R"("memory_bytes":85520809984,"multiprocessors":132,)"
                           R"("name":"NVIDIA H100 80GB HBM3","pci_bus_id":"0000:3b:00.0"}],)"
                           R"("sample":{"cpu":{"memory_available_bytes":200000000000,)"
                           R"("memory_used_bytes":70582939648,"utilization_percent":5.0},)"
                           R"("gpus":[{"device":"cuda:0","index":0,)"
                           R"("memory_used_bytes":1073741824,"power_w":70.0,)"
                           R"("temperature_c":40.0,"utilization_percent":0.0}],)"
                           R"("nvml_status":"","time":"2026-11-21T08:21:47.084Z"}})";

DeviceSnapshot only_snapshot(const QSignalSpy& spy) {
  return spy.first().first().value<DeviceSnapshot>();
}

// Sets an environment variable for one scope and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const QByteArray& value)
      : name_(name), had_(qEnvironmentVariableIsSet(name)), old_(qgetenv(name)) {
    qputenv(name, value);
  }
  ~ScopedEnv() {
    if (had_)
      qputenv(name_, old_);
    else
      qunsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_;
  QByteArray old_;
};

}  // namespace

class DevicesPanelTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { qRegisterMetaType<DeviceSnapshot>(); }

  // The shown run's placement under the readings, and gone with the run.
  void placement_of_the_shown_run() {
    DevicesPanel panel;
    QVERIFY(panel.placement_text().isEmpty());
    const QStringList lines = {"cpu worker 0 · replica 0 · stage 0: hidden",
                               "cpu worker 1 · replica 0 · stage 1: drop, middle, out"};
    panel.show_placement(lines);
    QCOMPARE(panel.placement_text(), lines.join('\n'));
    panel.show_placement({});
    QVERIFY(panel.placement_text().isEmpty());
  }

  // (a) The real engine, as the dashboard runs it.
  void real_engine_reports_this_machine() {
    if (tandem::gui::engine_path().isEmpty())
      QSKIP("no tandem engine (set TANDEM_ENGINE to the built core/tandem)");
    DeviceMonitor monitor;
    QSignalSpy snapshots(&monitor, &DeviceMonitor::snapshot);
    QSignalSpy failures(&monitor, &DeviceMonitor::failed);
    monitor.start();
    QVERIFY(monitor.is_running());
    QVERIFY2(snapshots.wait(10000), failures.isEmpty()
                                        ? "no snapshot within 10 s"
                                        : qPrintable(failures.first().first().toString()));
    QCOMPARE(monitor.skipped_line_count(), 0);
    const DeviceSnapshot snapshot = only_snapshot(snapshots);
    QVERIFY(snapshot.cpu_cores.value_or(0) >= 1);
    QVERIFY(snapshot.memory_total_bytes.value_or(0) > 0);
    QVERIFY(snapshot.cuda_reported);
    QVERIFY(snapshot.time.isValid());

    DevicesPanel panel;
    panel.resize(400, 600);
    panel.show_snapshot(snapshot);
    if (snapshot.gpus.empty()) {
      QCOMPARE(panel.gpu_row_count(), 0);
      const QString status = panel.status_text();
      QVERIFY2(status.startsWith("No GPU"), qPrintable(status));
      // The engine always says why there is no GPU; the panel passes its words on.
      QString reason = snapshot.cuda_status;
      reason.remove(QRegularExpression("^no CUDA GPU:\\s*"));
      QVERIFY2(!reason.trimmed().isEmpty(), qPrintable(snapshot.cuda_status));
      QVERIFY2(status.contains(reason), qPrintable(status + " / " + reason));
      QVERIFY(panel.nvml_note_text().isEmpty());
    } else {
      QCOMPARE(panel.gpu_row_count(), static_cast<int>(snapshot.gpus.size()));
      QVERIFY(panel.status_text().isEmpty());
    }
    QProgressBar* cpu = panel.cpu_utilisation_bar();
    QVERIFY(cpu);
    QVERIFY2(cpu->value() >= 0 && cpu->value() <= 100, qPrintable(QString::number(cpu->value())));
    QCOMPARE(cpu->minimum(), 0);
    QCOMPARE(cpu->maximum(), 100);
    QVERIFY(panel.cpu_memory_bar()->maximum() > 0);

    QElapsedTimer timer;
    timer.start();
    monitor.stop();
    QVERIFY2(timer.elapsed() < 3000, qPrintable(QString::number(timer.elapsed())));
    QVERIFY(!monitor.is_running());
    QTest::qWait(100);  // a failed() would be queued: let it arrive
    QCOMPARE(failures.count(), 0);
  }

  // (b) Recorded output with two GPUs, then the same GPUs, then one GPU.
  void gpu_rows_follow_the_gpu_set() {
    DeviceMonitor monitor;
    QSignalSpy snapshots(&monitor, &DeviceMonitor::snapshot);
    monitor.feed_line(kTwoGpus + '\n');
    QCOMPARE(snapshots.count(), 1);
    const DeviceSnapshot two = only_snapshot(snapshots);
    QCOMPARE(two.gpus.size(), std::size_t{2});
    QCOMPARE(two.cpu_model, QString("AMD EPYC 7B13"));
    QCOMPARE(two.gpus[0].temperature_c, std::optional<double>(64.0));
    QVERIFY(!two.gpus[1].utilization_percent);
    QCOMPARE(tandem::gui::no_gpu_reason(two), QString());

    DevicesPanel panel;
    panel.resize(400, 600);
    panel.show_snapshot(two);
    QCOMPARE(panel.gpu_row_count(), 2);
    QVERIFY(panel.status_text().isEmpty());
    QVERIFY(panel.nvml_note_text().isEmpty());
    QCOMPARE(panel.cpu_utilisation_bar()->value(), 38);  // 37.5 rounded

    QVERIFY(panel.gpu_title_label(0)->text().contains("cuda:0"));
    QVERIFY(panel.gpu_title_label(1)->text().contains("cuda:1"));
    QVERIFY(panel.gpu_title_label(1)->text().contains("NVIDIA H100 80GB HBM3"));
    QCOMPARE(panel.gpu_utilisation_bar(0)->value(), 87);
    QProgressBar* memory = panel.gpu_memory_bar(0);
    QCOMPARE(memory->maximum(), 81559);  // 85520809984 bytes in MiB
    QCOMPARE(memory->value(), 40960);    // 40 GiB
    QCOMPARE(memory->text(), QString("40.0 / 79.6 GiB"));
    QProgressBar* temperature = panel.gpu_temperature_bar(0);
    QCOMPARE(temperature->minimum(), 0);
    QCOMPARE(temperature->maximum(), 100);
    QCOMPARE(temperature->value(), 64);
    QCOMPARE(temperature->property("hot").toBool(), false);
    QCOMPARE(panel.gpu_power_label(0)->text(), QString("312 W"));

    // GPU 1: unknown readings stay unknown, not 0.
    QVERIFY(!panel.gpu_utilisation_bar(1)->isEnabled());
    QCOMPARE(panel.gpu_utilisation_bar(1)->text(), QString("unknown"));
    QCOMPARE(panel.gpu_memory_bar(1)->text(), QString("? / 79.6 GiB"));
    QCOMPARE(panel.gpu_power_label(1)->text(), QString("unknown"));
    QCOMPARE(panel.gpu_temperature_bar(1)->value(), 86);
    QCOMPARE(panel.gpu_temperature_bar(1)->property("hot").toBool(), true);
    QVERIFY(panel.gpu_utilisation_bar(2) == nullptr);

    // Same GPUs: updated in place, the widgets stay.
    QPointer<QProgressBar> kept = panel.gpu_utilisation_bar(0);
    monitor.feed_line(two_gpus_later());
    QCOMPARE(snapshots.count(), 2);
    panel.show_snapshot(snapshots.last().first().value<DeviceSnapshot>());
    QCOMPARE(panel.gpu_row_count(), 2);
    QVERIFY(kept);
    QCOMPARE(panel.gpu_utilisation_bar(0), kept.data());
    QCOMPARE(kept->value(), 12);
    QCOMPARE(panel.gpu_temperature_bar(0)->property("hot").toBool(), true);  // 81 °C

    // One GPU: rebuilt.
    monitor.feed_line(kOneGpu);
    QCOMPARE(snapshots.count(), 3);
    panel.show_snapshot(snapshots.last().first().value<DeviceSnapshot>());
    QCOMPARE(panel.gpu_row_count(), 1);
    QVERIFY(!kept);  // the old rows were deleted
    QCOMPARE(panel.gpu_utilisation_bar(0)->value(), 0);
    QVERIFY(panel.gpu_utilisation_bar(0)->isEnabled());  // 0 % is a reading, not unknown
    QCOMPARE(panel.gpu_memory_bar(0)->text(), QString("1.0 / 79.6 GiB"));
    QCOMPARE(panel.gpu_temperature_bar(0)->property("hot").toBool(), false);
    QVERIFY(panel.gpu_title_label(1) == nullptr);
    QCOMPARE(monitor.skipped_line_count(), 0);

    const QStringList plans = tandem::gui::device_plan_choices(two);
    QCOMPARE(plans.first(), QString("auto"));
    QVERIFY(plans.contains("cpu"));
    QVERIFY(plans.contains("cpu:64"));
    QVERIFY(plans.contains("cuda:0"));
    QVERIFY(plans.contains("cuda:1"));
    QCOMPARE(plans.last(), QString("cuda:all"));
  }

  // (c) Lines that are not device reports are counted and dropped.
  void garbage_lines_emit_nothing() {
    DeviceMonitor monitor;
    QSignalSpy snapshots(&monitor, &DeviceMonitor::snapshot);
    const QList<QByteArray> garbage{
        "not json",
        R"({"gpus": 5})",
        kTwoGpus.left(kTwoGpus.size() / 2),  // truncated
        "[]",
        "{}",
        "42",
        R"({"cpu": 3, "gpus": []})",
        QByteArray::fromHex("fffe0001") + " binary",
        QByteArray(100000, '{'),
    };
    for (const QByteArray& line : garbage) monitor.feed_line(line);
    monitor.feed_line("");
    monitor.feed_line("   \r\n");
    QCOMPARE(snapshots.count(), 0);
    QCOMPARE(monitor.skipped_line_count(), static_cast<int>(garbage.size()));
    QCOMPARE(monitor.snapshot_count(), 0);

    // Still works afterwards; a CRLF line ending is fine.
    monitor.feed_line(kOneGpu + "\r\n");
    QCOMPARE(snapshots.count(), 1);
    QCOMPARE(only_snapshot(snapshots).gpus.size(), std::size_t{1});
  }

  // Null, missing and mistyped fields become unknown; the panel shows them without crashing.
  void odd_fields_become_unknown() {
    const QByteArray odd =
        R"({"cpu":{"model_name":null,"logical_cores":"many","memory_bytes":-5},)"
        R"("cuda":{"built":"yes","status":null},)"
        R"("gpus":[{"index":0,"name":null,"memory_bytes":null},{"name":"no index"},7,)"
        R"({"device":"cuda:3","memory_bytes":1.5},{"index":0,"name":"duplicate"}],)"
        R"("sample":{"cpu":null,"gpus":[{"index":0,"utilization_percent":"high",)"
        R"("temperature_c":null,"power_w":true},"x",{"index":9,"power_w":5}],"time":"noon"}})";
    const std::optional<DeviceSnapshot> parsed = tandem::gui::parse_device_line(odd);
    QVERIFY(parsed);
    const DeviceSnapshot& s = *parsed;
    QVERIFY(s.cpu_model.isEmpty());
    QVERIFY(!s.cpu_cores);
    QVERIFY(!s.memory_total_bytes);
    QVERIFY(!s.memory_used_bytes);
    QVERIFY(!s.cpu_utilization_percent);
    QVERIFY(s.cuda_reported);
    QVERIFY(!s.cuda_built);
    QCOMPARE(s.gpus.size(), std::size_t{2});
    QCOMPARE(s.gpus[0].index, 0);
    QVERIFY(s.gpus[0].name.isEmpty());
    QVERIFY(!s.gpus[0].utilization_percent);
    QVERIFY(!s.gpus[0].power_w);
    QCOMPARE(s.gpus[1].index, 3);
    QVERIFY(!s.gpus[1].memory_total_bytes);
    QVERIFY(!s.time.isValid());

    DevicesPanel panel;
    panel.show_snapshot(s);
    QCOMPARE(panel.gpu_row_count(), 2);
    QCOMPARE(panel.cpu_utilisation_bar()->text(), QString("unknown"));
    QCOMPARE(panel.gpu_memory_bar(1)->text(), QString("unknown"));
    QCOMPARE(panel.gpu_temperature_bar(0)->property("hot").toBool(), false);
  }

  void no_gpu_reasons_are_plain() {
    DeviceSnapshot s;
    QVERIFY(tandem::gui::no_gpu_reason(s).startsWith("No GPU"));

    s.cuda_reported = true;
    s.cuda_built = false;
    s.cuda_status = "no CUDA GPU: this Tandem was built without CUDA";
    QVERIFY(tandem::gui::no_gpu_reason(s).contains("no CUDA support"));

    s.cuda_built = true;
    s.cuda_status =
        "no CUDA GPU: CUDA driver version is insufficient for CUDA runtime version (error 35)";
    QString reason = tandem::gui::no_gpu_reason(s);
    QVERIFY2(reason.contains("no CUDA driver on this machine"), qPrintable(reason));
    QVERIFY(reason.contains(
        "CUDA driver version is insufficient for CUDA runtime version (error 35)."));

    s.cuda_driver_version = 11040;
    reason = tandem::gui::no_gpu_reason(s);
    QVERIFY2(reason.contains("driver is too old"), qPrintable(reason));

    s.cuda_driver_version = 12040;
    s.cuda_status = "no CUDA GPU: no CUDA-capable device is detected (error 100)";
    reason = tandem::gui::no_gpu_reason(s);
    QVERIFY2(reason.contains("this machine has no CUDA GPU"), qPrintable(reason));
    QVERIFY(reason.contains("no CUDA-capable device is detected (error 100)"));

    QCOMPARE(tandem::gui::device_plan_choices(s), QStringList({"auto", "cpu"}));
    s.cpu_cores = 6;
    QCOMPARE(tandem::gui::device_plan_choices(s),
             QStringList({"auto", "cpu", "cpu:2", "cpu:4", "cpu:6"}));
  }

  // (d) TANDEM_ENGINE names a file that does not exist.
  void missing_engine_fails() {
    const QByteArray missing = "/nonexistent/tandem-engine";
    ScopedEnv env("TANDEM_ENGINE", missing);
    DeviceMonitor monitor;
    QSignalSpy snapshots(&monitor, &DeviceMonitor::snapshot);
    QSignalSpy failures(&monitor, &DeviceMonitor::failed);
    monitor.start();
    QVERIFY(!monitor.is_running());
    QVERIFY(failures.count() > 0 || failures.wait(5000));
    QCOMPARE(failures.count(), 1);
    const QString message = failures.first().first().toString();
    QVERIFY2(message.contains(QString::fromUtf8(missing)), qPrintable(message));
    QCOMPARE(snapshots.count(), 0);

    DevicesPanel panel;
    panel.show_error(message);
    QCOMPARE(panel.status_text(), message);
  }

  // An engine that prints one reading, complains on stderr and exits: failed() quotes stderr.
  void engine_exit_is_reported_with_stderr() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString script = dir.filePath("tandem");
    QFile file(script);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("#!/bin/sh\nprintf '%s\\n' '" + kOneGpu + "'\n");
    file.write("echo 'warming up' >&2\necho 'error: pretend the engine broke' >&2\n");
    file.write("printf '{\"cpu\":'\nexit 3\n");
    file.close();
    QVERIFY(QFile::setPermissions(script, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));

    ScopedEnv env("TANDEM_ENGINE", QFile::encodeName(script));
    DeviceMonitor monitor;
    QSignalSpy snapshots(&monitor, &DeviceMonitor::snapshot);
    QSignalSpy failures(&monitor, &DeviceMonitor::failed);
    monitor.start();
    QVERIFY(failures.wait(10000));
    QCOMPARE(failures.count(), 1);
    QCOMPARE(snapshots.count(), 1);
    QCOMPARE(monitor.skipped_line_count(), 1);  // the unfinished last line
    const QString message = failures.first().first().toString();
    QVERIFY2(message.contains("code 3"), qPrintable(message));
    QVERIFY2(message.contains("error: pretend the engine broke"), qPrintable(message));
    QVERIFY(!monitor.is_running());
  }
};

QTEST_MAIN(DevicesPanelTest)
#include "devices_panel_test.moc"
