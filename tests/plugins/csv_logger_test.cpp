// csv_logger: the exact file content (header, sorted keys, NA, number format, append).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "plugins/plugin_test_support.hpp"
#include "test_support.hpp"

namespace tandem::test {
namespace TANDEM_TEST_FILE {

using nlohmann::json;

Logs logs_of(std::initializer_list<std::pair<const char*, double>> items) {
  Logs l;
  for (const auto& [k, v] : items) l.set(k, v);
  return l;
}

// Drives the callback's hooks directly with the given epoch logs (one fit).
void drive(PluginRun& run, const json& options, const std::vector<Logs>& epochs) {
  auto cb = run.host.load("csv_logger").create(options, {Target::template_model, "callbacks[0]"});
  cb->on_train_begin(*run.trainer, Logs{});
  for (std::size_t e = 0; e < epochs.size(); ++e)
    cb->on_epoch_end(*run.trainer, static_cast<int>(e), epochs[e]);
  cb->on_train_end(*run.trainer, epochs.empty() ? Logs{} : epochs.back());
}

TEST(CsvLoggerPlugin, WritesEpochAndSortedKeysWithNAForMissingValues) {
  PluginRun run;
  drive(run, {{"filename", "log.csv"}},
        {logs_of({{"loss", 0.5}, {"accuracy", 0.25}, {"val_loss", 1e-5}}),
         logs_of({{"loss", 0.1 + 0.2}, {"accuracy", 1.0}}),
         logs_of({{"loss", 1234.5}, {"accuracy", 0.0001}, {"val_loss", 1e16}, {"extra", 7}})});
  // Keys come from the first epoch's logs; Python float repr for values; epoch is 0-based.
  EXPECT_EQ(read_text(run.run_dir / "log.csv"),
            "epoch,accuracy,loss,val_loss\n"
            "0,0.25,0.5,1e-05\n"
            "1,1.0,0.30000000000000004,NA\n"
            "2,0.0001,1234.5,1e+16\n");
}

TEST(CsvLoggerPlugin, NonFiniteValuesAndNegativeNumbersAsPythonWritesThem) {
  PluginRun run;
  drive(run, {{"filename", "log.csv"}},
        {logs_of({{"a", std::numeric_limits<double>::quiet_NaN()},
                  {"b", std::numeric_limits<double>::infinity()},
                  {"c", -2.5e-7},
                  {"d", -0.0},
                  {"e", 1e15}})});
  EXPECT_EQ(read_text(run.run_dir / "log.csv"),
            "epoch,a,b,c,d,e\n0,nan,inf,-2.5e-07,-0.0,1000000000000000.0\n");
}

TEST(CsvLoggerPlugin, SeparatorAndAppendContinueTheFileWithOneHeader) {
  PluginRun run;
  const json opts = {{"filename", "sub/log.csv"}, {"separator", ";"}, {"append", true}};
  drive(run, opts, {logs_of({{"loss", 0.5}, {"accuracy", 0.75}})});
  drive(run, opts, {logs_of({{"loss", 0.25}, {"accuracy", 0.875}}), logs_of({{"loss", 0.125}})});
  EXPECT_EQ(read_text(run.run_dir / "sub" / "log.csv"),
            "epoch;accuracy;loss\n0;0.75;0.5\n0;0.875;0.25\n1;NA;0.125\n");
  // Appending keeps the existing header's columns, so rows stay aligned with it.
  drive(run, opts, {logs_of({{"val_loss", 2.0}, {"loss", 0.0625}})});
  EXPECT_EQ(read_text(run.run_dir / "sub" / "log.csv"),
            "epoch;accuracy;loss\n0;0.75;0.5\n0;0.875;0.25\n1;NA;0.125\n0;NA;0.0625\n");
  // Without append the file starts over.
  drive(run, {{"filename", "sub/log.csv"}, {"separator", ";"}}, {logs_of({{"loss", 1.0}})});
  EXPECT_EQ(read_text(run.run_dir / "sub" / "log.csv"), "epoch;loss\n0;1.0\n");
}

TEST(CsvLoggerPlugin, AppendToAMissingOrEmptyFileWritesTheHeader) {
  PluginRun run;
  write_text(run.run_dir / "empty.csv", "");
  drive(run, {{"filename", "empty.csv"}, {"append", true}}, {logs_of({{"loss", 0.5}})});
  EXPECT_EQ(read_text(run.run_dir / "empty.csv"), "epoch,loss\n0,0.5\n");
  drive(run, {{"filename", "new.csv"}, {"append", true}}, {logs_of({{"loss", 0.5}})});
  EXPECT_EQ(read_text(run.run_dir / "new.csv"), "epoch,loss\n0,0.5\n");
}

TEST(CsvLoggerPlugin, QuotesFieldsHoldingTheSeparator) {
  PluginRun run;
  drive(run, {{"filename", "q.csv"}}, {logs_of({{"a,b", 1.0}, {"say \"hi\"", 2.0}})});
  EXPECT_EQ(read_text(run.run_dir / "q.csv"), "epoch,\"a,b\",\"say \"\"hi\"\"\"\n0,1.0,2.0\n");
}

// Python's csv module (QUOTE_MINIMAL) quotes any field holding the separator, values included:
// with "." the value 0.75 must be "0.75" or a reader splits it (read back with Python below).
TEST(CsvLoggerPlugin, ValuesHoldingTheSeparatorAreQuotedAsPythonQuotesThem) {
  PluginRun run;
  drive(run, {{"filename", "dot.csv"}, {"separator", "."}},
        {logs_of({{"loss", 0.75}, {"accuracy", 1.0}})});
  EXPECT_EQ(read_text(run.run_dir / "dot.csv"), "epoch.accuracy.loss\n0.\"1.0\".\"0.75\"\n");
  drive(run, {{"filename", "e.csv"}, {"separator", "e"}}, {logs_of({{"loss", 1e-05}})});
  EXPECT_EQ(read_text(run.run_dir / "e.csv"), "\"epoch\"eloss\n0e\"1e-05\"\n");
  const CommandResult read_back =
      run_python(run.run_dir / "read.py",
                 "import csv,sys; print(list(csv.reader(open(sys.argv[1]), delimiter='.')))",
                 (run.run_dir / "dot.csv").string());
  EXPECT_EQ(read_back.out, "[['epoch', 'accuracy', 'loss'], ['0', '1.0', '0.75']]\n")
      << read_back.err;
}

TEST(CsvLoggerPlugin, LogsARealFitRowByRowAndAnAbsolutePath) {
  PluginRun run;
  const auto file = scratch_dir("csv-abs") / "fit.csv";
  run.add("csv_logger", {{"filename", file.string()}});
  const auto& history =
      run.fit(std::make_shared<TableDataset>(32), std::make_shared<TableDataset>(16), 3, 8);
  std::istringstream in(read_text(file));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "epoch,accuracy,loss,val_accuracy,val_loss");
  for (std::size_t e = 0; e < history.size(); ++e) {
    ASSERT_TRUE(std::getline(in, line));
    std::istringstream row(line);
    std::string field;
    std::vector<std::string> f;
    while (std::getline(row, field, ',')) f.push_back(field);
    ASSERT_EQ(f.size(), 5u) << line;
    EXPECT_EQ(f[0], std::to_string(e));
    // Every value reads back to the very double of the history.
    EXPECT_EQ(std::stod(f[1]), *history[e].get("accuracy"));
    EXPECT_EQ(std::stod(f[2]), *history[e].get("loss"));
    EXPECT_EQ(std::stod(f[3]), *history[e].get("val_accuracy"));
    EXPECT_EQ(std::stod(f[4]), *history[e].get("val_loss"));
  }
  EXPECT_FALSE(std::getline(in, line));
}

TEST(CsvLoggerPlugin, BadOptionsNameTheirPath) {
  PluginRun run;
  auto path_of = [&](const json& options) -> std::string {
    try {
      run.host.load("csv_logger").create(options, {Target::template_model, "callbacks[3]"});
    } catch (const ConfigError& e) {
      return e.path();
    }
    return "";
  };
  EXPECT_EQ(path_of(json::object()), "callbacks[3].options.filename");
  EXPECT_EQ(path_of({{"filename", ""}}), "callbacks[3].options.filename");
  EXPECT_EQ(path_of({{"filename", 3}}), "callbacks[3].options.filename");
  EXPECT_EQ(path_of({{"filename", "a.csv"}, {"separator", ""}}), "callbacks[3].options.separator");
  EXPECT_EQ(path_of({{"filename", "a.csv"}, {"separator", "\""}}),
            "callbacks[3].options.separator");
  EXPECT_EQ(path_of({{"filename", "a.csv"}, {"append", "yes"}}), "callbacks[3].options.append");
  EXPECT_EQ(path_of({{"filename", "a.csv"}, {"sep", ";"}}), "callbacks[3].options.sep");
  EXPECT_EQ(path_of({{"filename", "a.csv"}, {"separator", "\t"}}), "");
  // Python's csv module takes a one-character delimiter: "::" wrote files nothing read back.
  EXPECT_EQ(path_of({{"filename", "a.csv"}, {"separator", "::"}}),
            "callbacks[3].options.separator");
  EXPECT_EQ(path_of({{"filename", "a.csv"}, {"separator", "\u00e9"}}), "");  // é: one character
  // The run's own files: a CSV there would replace the event stream, the config, ...
  for (const char* own : {"events.jsonl", "config.json", "model.h5", "./checkpoints.json",
                          "ck/checkpoints.json", ".tandem.lock"})
    EXPECT_EQ(path_of({{"filename", own}}), "callbacks[3].options.filename") << own;
  EXPECT_EQ(path_of({{"filename", "ck/events.jsonl"}}), "");  // not the run's stream
}

}  // namespace
}  // namespace tandem::test
