// run_file_of / refuse_run_file (tandem/run_files.hpp): which paths are a run's own files, by
// path alone — relative to the run folder or absolute, through "..", nested indexes — and what
// the refusal says.
#include "tandem/run_files.hpp"

#include <gtest/gtest.h>

#include "tandem/error.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

TEST(RunFiles, TheRunsOwnFilesAreKnownByPathAlone) {
  const std::filesystem::path run = "/runs/a";
  EXPECT_EQ(run_file_of(run, "events.jsonl"), RunFile::event_stream);
  EXPECT_EQ(run_file_of(run, "/runs/a/config.json"), RunFile::stored_config);
  EXPECT_EQ(run_file_of(run, "ck/../model.h5"), RunFile::final_model);
  EXPECT_EQ(run_file_of(run, "./.tandem.lock"), RunFile::folder_lock);
  EXPECT_EQ(run_file_of(run, "checkpoints.json"), RunFile::checkpoint_index);
  EXPECT_EQ(run_file_of(run, "ck/best/checkpoints.json"), RunFile::checkpoint_index);
  EXPECT_EQ(run_file_of("/runs/a/", "/runs/a//events.jsonl"), RunFile::event_stream);
  // Not the run's: the same names elsewhere, other names, no run folder.
  EXPECT_EQ(run_file_of(run, "ck/events.jsonl"), RunFile::none);
  EXPECT_EQ(run_file_of(run, "ck/model.h5"), RunFile::none);
  EXPECT_EQ(run_file_of(run, "/runs/b/events.jsonl"), RunFile::none);
  EXPECT_EQ(run_file_of(run, "../b/config.json"), RunFile::none);
  EXPECT_EQ(run_file_of(run, "/runs/a-copy/model.h5"), RunFile::none);
  EXPECT_EQ(run_file_of(run, "log.csv"), RunFile::none);
  EXPECT_EQ(run_file_of("", "events.jsonl"), RunFile::none);
  EXPECT_EQ(run_file_of(run, ""), RunFile::none);
}

TEST(RunFiles, ARefusalNamesTheOptionTheFileAndWhatItIs) {
  try {
    refuse_run_file("/runs/a", "model.h5", "callbacks[1].options.filepath");
    FAIL() << "model.h5 was taken";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "callbacks[1].options.filepath");
    EXPECT_EQ(std::string(e.what()),
              "config error at 'callbacks[1].options.filepath': model.h5 is the run's final "
              "model (model.h5, written when the run ends): writing there would replace it; "
              "choose another file name");
  }
  EXPECT_NO_THROW(refuse_run_file("/runs/a", "events.jsonl", "x", RunFile::event_stream));
  EXPECT_THROW(refuse_run_file("/runs/a", "config.json", "x", RunFile::event_stream), ConfigError);
  EXPECT_NO_THROW(refuse_run_file("/runs/a", "best.h5", "x"));
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
