#include "tandem/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using test::read_text;
using test::scratch_dir;
using test::write_text;

std::vector<std::string> folder_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

template <typename F>
std::string run_error_of(F&& f) {
  try {
    f();
  } catch (const RunError& e) {
    return e.what();
  }
  return "(no RunError)";
}

TEST(AtomicFile, WritesANewFileAndReplacesAnOldOne) {
  auto dir = scratch_dir("atomic-replace");
  const fs::path path = dir / "index.json";
  write_file_atomically(path, "first\n");
  EXPECT_EQ(read_text(path), "first\n");
  write_file_atomically(path, "second, longer than the first\n");
  EXPECT_EQ(read_text(path), "second, longer than the first\n");
  write_file_atomically(path, "");
  EXPECT_EQ(read_text(path), "");
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"index.json"});  // no temporary left
}

TEST(AtomicFile, TheTargetKeepsItsOldContentUntilCommit) {
  auto dir = scratch_dir("atomic-until-commit");
  const fs::path path = dir / "out.csv";
  write_text(path, "old\n");
  AtomicFile file(path);
  EXPECT_EQ(file.target(), path);
  EXPECT_EQ(file.temp_path().parent_path(), dir);  // same folder: the rename cannot cross devices
  EXPECT_EQ(file.temp_path().filename().string().rfind(".out.csv.tmp-", 0), 0u) << file.temp_path();
  file.write("new ");
  file.write("content\n");
  EXPECT_EQ(read_text(path), "old\n");
  EXPECT_EQ(folder_entries(dir).size(), 2u);
  file.commit();
  EXPECT_EQ(read_text(path), "new content\n");
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"out.csv"});
}

TEST(AtomicFile, CommitsATemporaryFileWrittenByAnotherWriterThroughItsName) {
  // The way a library that wants a file name (std::ofstream here, HDF5 alike) goes through it.
  auto dir = scratch_dir("atomic-by-name");
  const fs::path path = dir / "predictions.npy";
  write_text(path, "old");
  AtomicFile file(path);
  {
    std::ofstream out(file.temp_path(), std::ios::binary | std::ios::trunc);
    out << "written by name";
  }
  EXPECT_EQ(read_text(path), "old");
  file.commit();
  EXPECT_EQ(read_text(path), "written by name");
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"predictions.npy"});
}

TEST(AtomicFile, DestroyedUncommittedItRemovesItsTemporaryFileAndLeavesTheTarget) {
  auto dir = scratch_dir("atomic-abandoned");
  const fs::path path = dir / "ckpt.h5";
  write_text(path, "old");
  {
    AtomicFile file(path);
    file.write("half of a new fi");
  }
  EXPECT_EQ(read_text(path), "old");
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"ckpt.h5"});
}

TEST(AtomicFile, ATargetThatIsAFolderFailsNamingItAndLeavesNothingBehind) {
  auto dir = scratch_dir("atomic-target-folder");
  const fs::path path = dir / "taken";
  fs::create_directory(path);
  write_text(path / "inside.txt", "kept");
  const std::string message = run_error_of([&] { write_file_atomically(path, "bytes"); });
  EXPECT_NE(message.find("cannot write '" + path.string() + "': it is a folder, not a file"),
            std::string::npos)
      << message;
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"taken"});
  EXPECT_EQ(read_text(path / "inside.txt"), "kept");
}

// Renaming a new file over a FIFO or a device replaces it (`tandem export -o /dev/null` replaced
// the system's /dev/null): they are refused before anything is written. A symbolic link is
// replaced itself, whatever it points to: the device it names stays.
TEST(AtomicFile, AFifoOrADeviceIsRefusedAndALinkToOneIsReplacedAsALink) {
  auto dir = scratch_dir("atomic-special");
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string message = run_error_of([&] { write_file_atomically(fifo, "bytes"); });
  EXPECT_NE(message.find("cannot write '" + fifo.string() + "': it is a FIFO"), std::string::npos)
      << message;
  // The same device as /dev/null, made here (as root), so that a regression replaces this one.
  const fs::path device = dir / "null";
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    message = run_error_of([&] { write_file_atomically(device, "bytes"); });
    EXPECT_NE(message.find("it is a device, not a regular file"), std::string::npos) << message;
    struct stat st {};
    ASSERT_EQ(::lstat(device.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
  const fs::path link = dir / "link";
  fs::create_symlink(fifo, link);
  write_file_atomically(link, "bytes");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(link)));
  EXPECT_EQ(read_text(link), "bytes");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  std::vector<std::string> expected{"link", "pipe"};
  if (fs::exists(fs::symlink_status(device))) expected = {"link", "null", "pipe"};
  EXPECT_EQ(folder_entries(dir), expected);
}

TEST(AtomicFile, AMissingOrUnusableFolderFailsNamingTheTargetAndTheReason) {
  auto dir = scratch_dir("atomic-no-folder");
  const fs::path missing = dir / "missing" / "x.json";
  std::string message = run_error_of([&] { write_file_atomically(missing, "{}"); });
  EXPECT_NE(message.find("cannot write '" + missing.string() + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(ENOENT)), std::string::npos) << message;

  write_text(dir / "plain.txt", "a file, not a folder");
  const fs::path under_file = dir / "plain.txt" / "x.json";
  message = run_error_of([&] { write_file_atomically(under_file, "{}"); });
  EXPECT_NE(message.find(under_file.string()), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(ENOTDIR)), std::string::npos) << message;
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"plain.txt"});

  message = run_error_of([&] { AtomicFile file(dir / ".."); });
  EXPECT_NE(message.find("names no file"), std::string::npos) << message;
}

TEST(AtomicFile, AReadOnlyFolderFailsAndLeavesTheOldFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  auto dir = scratch_dir("atomic-read-only");
  const fs::path path = dir / "index.json";
  write_text(path, "old");
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  const std::string message = run_error_of([&] { write_file_atomically(path, "new"); });
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_NE(message.find("cannot write '" + path.string() + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EACCES)), std::string::npos) << message;
  EXPECT_EQ(read_text(path), "old");
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"index.json"});
}

TEST(AtomicFile, AWriteThatFailsMidwayRemovesTheTemporaryFileAndKeepsTheOldOne) {
  auto dir = scratch_dir("atomic-full-disk");
  const fs::path path = dir / "big.bin";
  write_text(path, "old");
  // A 64 KiB file-size limit makes a 1 MiB write fail with EFBIG, as a full disk would (ENOSPC).
  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limit = old_limit;
  limit.rlim_cur = 1 << 16;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  const std::string message =
      run_error_of([&] { write_file_atomically(path, std::string(1 << 20, 'x')); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("cannot write '" + path.string() + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot write the temporary file"), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EFBIG)), std::string::npos) << message;
  EXPECT_EQ(read_text(path), "old");
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"big.bin"});
}

TEST(AtomicFile, ReadersOnlyEverSeeAWholeVersion) {
  auto dir = scratch_dir("atomic-readers");
  const fs::path path = dir / "state.txt";
  // Versions of different lengths: a reader of a file being rewritten in place would see a
  // truncated or mixed one.
  auto version = [](int i) {
    return std::string(1000 + 37 * (i % 50), static_cast<char>('a' + i % 26));
  };
  write_file_atomically(path, version(0));
  std::set<std::string> valid;
  for (int i = 0; i < 200; ++i) valid.insert(version(i));
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, torn{0};
  std::thread reader([&] {
    while (!done) {
      const std::string seen = read_text(path);
      ++reads;
      if (!valid.count(seen)) ++torn;
    }
  });
  for (int i = 1; i < 200; ++i) write_file_atomically(path, version(i));
  done = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(read_text(path), version(199));
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"state.txt"});
}

TEST(AtomicFile, ConcurrentWritersInOneFolderEachLandWhole) {
  auto dir = scratch_dir("atomic-writers");
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        write_file_atomically(dir / ("own-" + std::to_string(t)), std::to_string(i));
        write_file_atomically(dir / "shared", std::string(100 + t, static_cast<char>('0' + t)));
      }
    });
  for (auto& w : writers) w.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(read_text(dir / ("own-" + std::to_string(t))), "24");
  const std::string shared = read_text(dir / "shared");
  ASSERT_GE(shared.size(), 100u);
  EXPECT_EQ(shared, std::string(shared.size(), shared[0]));
  EXPECT_EQ(shared.size(), 100u + static_cast<std::size_t>(shared[0] - '0'));
  EXPECT_EQ(folder_entries(dir).size(), 5u);  // own-0..3 and shared: no temporary left
}

TEST(AtomicFile, MisuseAfterCommitIsALogicError) {
  auto dir = scratch_dir("atomic-misuse");
  AtomicFile file(dir / "f");
  file.commit();
  EXPECT_THROW(file.write("x"), std::logic_error);
  EXPECT_THROW(file.commit(), std::logic_error);
  EXPECT_EQ(read_text(dir / "f"), "");
}

}  // namespace
}  // namespace tandem
