// Finding the engine: $TANDEM_ENGINE first, a clear message when it is wrong.
#include <QtTest>

#include "engine_locator.hpp"

using namespace tandem::gui;

class EngineLocatorTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void the_environment_variable_wins_and_is_checked() {
    const QByteArray saved = qgetenv("TANDEM_ENGINE");
    QTemporaryDir dir;
    const QString fake = dir.filePath("my-tandem");
    QFile f(fake);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("#!/bin/sh\n");
    f.close();
    qputenv("TANDEM_ENGINE", fake.toUtf8());
    QCOMPARE(engine_path(), QString());  // not executable yet
    QVERIFY(engine_missing_message().contains("not an executable file"));
    QVERIFY(engine_missing_message().contains(fake));
    f.setPermissions(f.permissions() | QFile::ExeOwner);
    QCOMPARE(engine_path(), fake);
    qputenv("TANDEM_ENGINE", dir.filePath("missing").toUtf8());
    QCOMPARE(engine_path(), QString());
    qputenv("TANDEM_ENGINE", saved);
  }

  void without_the_variable_the_build_tree_engine_is_found() {
    const QByteArray saved = qgetenv("TANDEM_ENGINE");
    qunsetenv("TANDEM_ENGINE");
    // This test runs from build/tests/gui: neither next to it nor in ../core, so from PATH or
    // nowhere; either way the answer is an executable file or empty, with a message naming the
    // places searched.
    const QString found = engine_path();
    QVERIFY(found.isEmpty() || QFileInfo(found).isExecutable());
    QVERIFY(engine_missing_message().contains("TANDEM_ENGINE"));
    qputenv("TANDEM_ENGINE", saved);
  }
};

QTEST_GUILESS_MAIN(EngineLocatorTest)
#include "engine_locator_test.moc"
