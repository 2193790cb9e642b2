// The "images" dataset type, as Keras' image_dataset_from_directory: a folder with one
// sub-folder per class (files found recursively inside it), or a list of files and labels (CSV
// with path and label columns, or JSON). Files are JPEG or PNG by their first bytes; each
// batch's files are read and decoded by a pool of worker threads straight into the batch's
// rows, resized to image_size (bilinear) and scaled. The files' order is a seeded shuffle of
// the sorted list, so validation_split holds out a random fraction, the same on every run.
//
// A file that cannot be read or decoded stops the run naming it (on_bad_file "error"), or is
// left out with a warning (on_bad_file "skip"): files that do not even start like an image are
// dropped when the dataset opens; one that fails later, in its decoder, is replaced in its
// batch by the next sample in order that decodes (the same one on every run), and counted.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "data/csv_table.hpp"
#include "data/datasets.hpp"
#include "data/image_decode.hpp"
#include "tandem/error.hpp"
#include "tandem/rng.hpp"
#include "util/json_text.hpp"
#include "util/regular_file.hpp"
#include "util/worker_pool.hpp"

namespace tandem::data {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMaxImageFileBytes = std::int64_t{1} << 28;
constexpr std::int64_t kMaxImageSide = 1 << 15;
constexpr std::int64_t kMaxWorkers = 256;
constexpr std::size_t kMaxNamed = 10;  // file names listed in one message

struct ImageFile {
  std::string path;
  std::int64_t label = 0;
};

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

bool hidden(const fs::path& p) {
  return !p.filename().empty() && p.filename().string()[0] == '.';
}

// The whole of a regular file, into `out` (reused between calls); DataError naming it.
void read_whole_file(const std::string& path, std::vector<std::uint8_t>& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw DataError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw DataError(path + ": not a regular file");
  if (st.st_size > kMaxImageFileBytes)
    throw DataError(path + ": " + std::to_string(st.st_size) + " bytes; image files of at most " +
                    std::to_string(kMaxImageFileBytes) + " bytes are read");
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DataError(path + ": cannot read (" + std::strerror(errno) + ")");
    if (n == 0) break;  // shrank while read: decode what is there
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
}

// The first bytes of a file: enough to tell JPEG and PNG from anything else.
std::vector<std::uint8_t> file_head(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<std::uint8_t> head(16);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  if (in.bad()) throw DataError(path + ": cannot read");
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head;
}

std::vector<std::string> sorted_subfolders(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (!hidden(e.path()) && e.is_directory()) names.push_back(e.path().filename().string());
  if (ec) throw DataError(folder + ": cannot list the folder (" + ec.message() + ")");
  std::sort(names.begin(), names.end());
  return names;
}

// "1 file", "2 files".
std::string count_of(std::int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string name_list_text(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < kMaxNamed; ++i)
    text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kMaxNamed)
    text += " and " + std::to_string(names.size() - kMaxNamed) + " more";
  return text;
}

// ---- what the files are: folders or a list ------------------------------------------------------

struct Listing {
  std::vector<ImageFile> files;
  std::vector<std::string> class_names;
  std::int64_t other_files = 0;  // files of other kinds in the class folders, ignored
};

// The image files under `dir`, recursively, sorted; hidden files and folders left out, other
// files counted in `other_files`. Paths as `dir` / what was found.
std::vector<std::string> images_under(const fs::path& dir, std::int64_t& other_files) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    if (is_image_name(it->path()))
      paths.push_back(it->path().string());
    else
      ++other_files;
  }
  if (ec) throw DataError(dir.string() + ": cannot list the folder (" + ec.message() + ")");
  std::sort(paths.begin(), paths.end());
  return paths;
}

Listing list_folders(const ImagesSpec& spec) {
  if (const std::string why = not_a_regular_file(spec.folder); why != "is a folder, not a file")
    throw DataError(spec.folder + ": " +
                    (why.empty() ? spec.labeled ? "a file, not a folder of class folders"
                                                : "a file, not a folder of images"
                                 : why));
  Listing l;
  if (!spec.labeled) {  // every image under the folder, its sub-folders included
    for (auto& p : images_under(spec.folder, l.other_files)) l.files.push_back({std::move(p), 0});
    return l;
  }
  const std::vector<std::string> found = sorted_subfolders(spec.folder);
  if (found.empty())
    throw DataError(spec.folder +
                    ": no class folders in it (the images dataset expects one "
                    "sub-folder per class, each holding that class's images)");
  l.class_names = spec.class_names.empty() ? found : spec.class_names;
  if (!spec.class_names.empty()) {
    std::vector<std::string> given = spec.class_names;
    std::sort(given.begin(), given.end());
    if (given != found)
      throw DataError(spec.folder + ": class_names " + name_list_text(spec.class_names) +
                      " do not match its class folders " + name_list_text(found));
  }
  for (std::size_t c = 0; c < l.class_names.size(); ++c)
    for (auto& p : images_under(fs::path(spec.folder) / l.class_names[c], l.other_files))
      l.files.push_back({std::move(p), static_cast<std::int64_t>(c)});
  return l;
}

// Rows of a list file: (path, label text, where: the file and `at`, the place in it).
struct ListEntry {
  std::string path, label, where, at;
};

std::vector<ListEntry> read_csv_list(const std::string& file) {
  const CsvTable t = read_csv_table(file, ',');
  std::ptrdiff_t path_col = -1, label_col = -1;
  for (std::size_t c = 0; c < t.header.size(); ++c) {
    if (t.header[c] == "path") path_col = static_cast<std::ptrdiff_t>(c);
    if (t.header[c] == "label") label_col = static_cast<std::ptrdiff_t>(c);
  }
  if (path_col < 0 || label_col < 0)
    throw DataError(file + ": the header needs the columns 'path' and 'label', it has " +
                    name_list_text(t.header));
  std::vector<ListEntry> out;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const std::string at = "row " + std::to_string(r + 2);
    out.push_back({t.rows[r][path_col], t.rows[r][label_col], file + ", " + at, at});
  }
  return out;
}

std::vector<ListEntry> read_json_list(const std::string& file) {
  std::vector<std::uint8_t> bytes;
  if (const std::string why = not_a_regular_file(file); !why.empty())
    throw DataError(file + ": " + why);
  read_whole_file(file, bytes);
  nlohmann::json j;
  try {
    j = parse_json_text(std::string(bytes.begin(), bytes.end()));
  } catch (const JsonTextRefused& e) {
    throw DataError(file + ": not a list of images: " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(file + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_array())
    throw DataError(file +
                    ": expected a list of [path, label] pairs or {\"path\": ..., "
                    "\"label\": ...} objects");
  std::vector<ListEntry> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = "[" + std::to_string(i) + "]", where = file + at;
    const nlohmann::json& e = j[i];
    const nlohmann::json* path = nullptr;
    const nlohmann::json* label = nullptr;
    if (e.is_array() && e.size() == 2) {
      path = &e[0];
      label = &e[1];
    } else if (e.is_object() && e.size() == 2 && e.contains("path") && e.contains("label")) {
      path = &e["path"];
      label = &e["label"];
    }
    if (path == nullptr || !path->is_string() ||
        !(label->is_string() || label->is_number_integer()))
      throw DataError(where +
                      ": expected [path, label] or {\"path\": ..., \"label\": ...} with "
                      "a path string and a label string or integer, got " +
                      e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    out.push_back({path->get<std::string>(),
                   label->is_string() ? label->get<std::string>() : label->dump(), where, at});
  }
  return out;
}

// A list's classes, sorted: integer labels (class indices, as Keras takes them) by value, so that
// 2 comes before 10; names as text.
std::vector<std::string> classes_of_labels(const std::vector<ListEntry>& entries) {
  std::set<std::string> labels;
  for (const ListEntry& e : entries) labels.insert(e.label);
  std::vector<std::string> names(labels.begin(), labels.end());
  const auto integer = [](const std::string& t) {
    return !t.empty() && t.size() < 19 && t.find_first_not_of("0123456789") == std::string::npos;
  };
  if (std::all_of(names.begin(), names.end(), integer))
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return std::make_pair(std::stoll(a), a) < std::make_pair(std::stoll(b), b);
    });
  return names;
}

// Every entry has a label, and a file listed twice has the same one both times (an empty label
// became a class named "", shifting the other classes' indices).
void check_list_labels(const std::vector<ListEntry>& entries) {
  std::map<std::string, const ListEntry*> first;
  for (const ListEntry& e : entries) {
    if (e.label.empty())
      throw DataError(e.where + ": an empty label; every file of a list needs its class");
    const auto [it, added] = first.emplace(fs::path(e.path).lexically_normal().string(), &e);
    if (!added && it->second->label != e.label)
      throw DataError(e.where + ": '" + e.path + "' has the label '" + e.label + "', but '" +
                      it->second->label + "' at " + it->second->at +
                      "; a file belongs to one class (list it again with the same label to "
                      "repeat it)");
  }
}

Listing list_file(const ImagesSpec& spec) {
  const bool json = fs::path(spec.list).extension() == ".json";
  const std::vector<ListEntry> entries =
      json ? read_json_list(spec.list) : read_csv_list(spec.list);
  check_list_labels(entries);
  Listing l;
  if (spec.class_names.empty()) {
    l.class_names = classes_of_labels(entries);
  } else {
    l.class_names = spec.class_names;
  }
  for (const ListEntry& e : entries) {
    const auto it = std::find(l.class_names.begin(), l.class_names.end(), e.label);
    if (it == l.class_names.end())
      throw DataError(e.where + ": the label '" + e.label + "' is not one of class_names " +
                      name_list_text(l.class_names));
    if (e.path.empty()) throw DataError(e.where + ": an empty path");
    if (e.path.find('\0') != std::string::npos)  // the file system would read it cut short
      throw DataError(e.where +
                      ": the path holds a NUL character (\\u0000), which no file name "
                      "can hold");
    l.files.push_back({resolve_path(spec.folder, e.path), it - l.class_names.begin()});
  }
  return l;
}

// ---- the dataset --------------------------------------------------------------------------------

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(const ImagesSpec& spec, Listing listing)
      : spec_(spec),
        mode_(static_cast<ColorMode>(spec.color_mode)),
        files_(std::move(listing.files)),
        class_names_(std::move(listing.class_names)),
        other_files_(listing.other_files),
        pool_(spec.workers > 0
                  ? spec.workers
                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
    drop_files_that_are_not_images();
    if (spec.shuffle) shuffle_files();
  }

  std::int64_t size() const override { return static_cast<std::int64_t>(files_.size()); }
  Shape x_shape() const override { return {spec_.rows, spec_.cols, channels_of(mode_)}; }
  Shape y_shape() const override {
    if (!spec_.labeled) return {0};  // data to predict
    switch (spec_.label_mode) {
      case LabelMode::categorical:
        return {static_cast<std::int64_t>(class_names_.size())};
      case LabelMode::binary:
        return {1};
      case LabelMode::index:
        break;
    }
    return {};
  }
  std::vector<std::string> class_names() const override { return class_names_; }
  std::string sample_file(std::int64_t i) const override {
    return i >= 0 && i < size() ? files_[static_cast<std::size_t>(i)].path : std::string();
  }
  std::int64_t skipped_files() const override { return skipped_.load(); }

  void read(std::span<const std::int64_t> indices, float* x, float* y) const override {
    const std::int64_t x_row = shape_size(x_shape()),
                       y_row = std::max<std::int64_t>(1, shape_size(y_shape()));
    const auto n = static_cast<std::int64_t>(indices.size());
    for (const std::int64_t i : indices)
      if (i < 0 || i >= size())
        throw DataError(describe() + ": sample " + std::to_string(i) + " out of range");
    pool_.run(n, [&](std::int64_t k) {
      const std::int64_t i = decode_into(indices[static_cast<std::size_t>(k)], x + k * x_row);
      if (spec_.labeled) write_label(files_[static_cast<std::size_t>(i)].label, y + k * y_row);
    });
  }

  std::string describe() const override {
    std::string d = "images: " + (spec_.list.empty() ? spec_.folder : spec_.list) + " (" +
                    count_of(static_cast<std::int64_t>(files_.size()), "file") + ", " +
                    (spec_.labeled ? std::to_string(class_names_.size()) +
                                         (class_names_.size() == 1 ? " class" : " classes")
                                   : std::string("unlabeled")) +
                    ", " + std::to_string(spec_.rows) + "x" + std::to_string(spec_.cols) + " " +
                    (mode_ == ColorMode::grayscale ? "grayscale"
                     : mode_ == ColorMode::rgb     ? "rgb"
                                                   : "rgba");
    if (dropped_ > 0) d += ", " + count_of(dropped_, "unreadable file") + " left out";
    if (other_files_ > 0) d += ", " + count_of(other_files_, "file") + " of other kinds ignored";
    return d + ")";
  }

 private:
  // Decodes sample i into `out`; returns the sample actually decoded (i, or under "skip" the
  // next one that decodes).
  std::int64_t decode_into(std::int64_t i, float* out) const {
    for (std::int64_t tries = 0; tries < size(); ++tries) {
      const std::int64_t at = (i + tries) % size();
      const ImageFile& f = files_[static_cast<std::size_t>(at)];
      if (spec_.on_bad_file == BadFilePolicy::skip && known_bad(at)) continue;
      try {
        decode_file(f.path, out);
        return at;
      } catch (const DataError& e) {
        if (spec_.on_bad_file == BadFilePolicy::error) throw;
        mark_bad(at, e.what());
      }
    }
    throw DataError(describe() + ": no file of the dataset could be decoded");
  }

  void decode_file(const std::string& path, float* out) const {
    thread_local std::vector<std::uint8_t> bytes;
    read_whole_file(path, bytes);
    const DecodedImage image =
        decode_image(bytes, mode_, path, spec_.rows, spec_.cols, spec_.crop_to_aspect_ratio);
    const CropWindow w =
        centred_window(image.rows, image.cols, spec_.rows, spec_.cols, spec_.crop_to_aspect_ratio);
    resize_bilinear(image, w, spec_.rows, spec_.cols, static_cast<float>(spec_.scale), out);
  }

  void write_label(std::int64_t label, float* y) const {
    switch (spec_.label_mode) {
      case LabelMode::categorical:
        std::fill(y, y + class_names_.size(), 0.0f);
        y[label] = 1.0f;
        return;
      case LabelMode::binary:
      case LabelMode::index:
        *y = static_cast<float>(label);
        return;
    }
  }

  bool known_bad(std::int64_t i) const {
    std::lock_guard<std::mutex> lock(bad_mutex_);
    return bad_.count(i) > 0;
  }

  void mark_bad(std::int64_t i, const std::string& why) const {
    std::lock_guard<std::mutex> lock(bad_mutex_);
    if (!bad_.insert(i).second) return;
    skipped_.store(dropped_ + static_cast<std::int64_t>(bad_.size()));
    spdlog::warn("{} (skipped: on_bad_file is \"skip\")", why);
  }

  // Files that do not start like a JPEG or PNG (or cannot be opened): an error naming them, or
  // under "skip" left out now, so they never take a place in a batch.
  void drop_files_that_are_not_images() {
    std::vector<std::string> why(files_.size());
    pool_.run(static_cast<std::int64_t>(files_.size()), [&](std::int64_t i) {
      const std::string& path = files_[static_cast<std::size_t>(i)].path;
      try {
        if (const std::string not_file = not_a_regular_file(path); !not_file.empty())
          throw DataError(path + ": " + not_file);
        sniff_image_format(file_head(path), path);
      } catch (const DataError& e) {
        why[static_cast<std::size_t>(i)] = e.what();
      }
    });
    std::vector<ImageFile> kept;
    for (std::size_t i = 0; i < files_.size(); ++i) {
      if (why[i].empty()) {
        kept.push_back(std::move(files_[i]));
        continue;
      }
      if (spec_.on_bad_file == BadFilePolicy::error)
        throw DataError(why[i] + " (on_bad_file \"skip\" leaves such files out)");
      spdlog::warn("{} (skipped: on_bad_file is \"skip\")", why[i]);
      ++dropped_;
    }
    files_ = std::move(kept);
    skipped_.store(dropped_);
  }

  // Fisher-Yates with Tandem's own generator: the same order on every platform.
  void shuffle_files() {
    Rng rng(spec_.seed);
    for (std::size_t i = files_.size(); i > 1; --i) std::swap(files_[i - 1], files_[rng.below(i)]);
  }

  ImagesSpec spec_;
  ColorMode mode_;
  std::vector<ImageFile> files_;
  std::vector<std::string> class_names_;
  std::int64_t other_files_ = 0;
  std::int64_t dropped_ = 0;  // left out when opened
  mutable WorkerPool pool_;
  mutable std::mutex bad_mutex_;
  mutable std::set<std::int64_t> bad_;  // samples whose decoder failed (under "skip")
  mutable std::atomic<std::int64_t> skipped_{0};
};

}  // namespace

ImagesSpec parse_images_spec(ConfigObject& spec, const std::string& base_dir) {
  ImagesSpec s;
  const bool listed = spec.has("list");
  if (listed) {
    s.list = resolve_path(base_dir, spec.get_string("list"));
    s.folder = spec.has("path") ? resolve_path(base_dir, spec.get_string("path"))
                                : fs::path(s.list).parent_path().string();
  } else {
    s.folder = resolve_path(base_dir, spec.get_string("path"));
  }
  // Keras' `labels`: "inferred" (from the class folders, the default) or null (none: images to
  // predict, every one under `path`).
  if (spec.given("labels") && !spec.has("labels")) {
    spec.ignore({"labels"});
    if (listed)
      throw ConfigError(spec.path_of("labels"),
                        "null with a \"list\": a list gives each file's label; for images "
                        "without labels leave out \"list\" and give the folder as \"path\"");
    if (spec.has("class_names"))
      throw ConfigError(spec.path_of("class_names"),
                        "given with \"labels\": null; images without labels have no classes");
    s.labeled = false;
  } else if (spec.has("labels") && spec.get_string("labels") != "inferred") {
    throw ConfigError(spec.path_of("labels"),
                      "expected \"inferred\" (labels from the class folders) or null (no labels: "
                      "images to predict); per-file labels go in a \"list\"");
  }
  if (spec.has("image_size")) {
    const auto size = spec.get_int_list("image_size", false);
    if (size.size() != 2 || *size[0] < 1 || *size[1] < 1 || *size[0] > kMaxImageSide ||
        *size[1] > kMaxImageSide)
      throw ConfigError(spec.path_of("image_size"),
                        "expected [rows, cols], each from 1 to " + std::to_string(kMaxImageSide));
    s.rows = static_cast<int>(*size[0]);
    s.cols = static_cast<int>(*size[1]);
  }
  const std::string mode = spec.one_of("color_mode", "rgb", {"grayscale", "rgb", "rgba"});
  s.color_mode = mode == "grayscale" ? 0 : mode == "rgb" ? 1 : 2;
  if (spec.has("class_names")) {
    s.class_names = name_list(spec, "class_names", "class name");
    std::set<std::string> unique(s.class_names.begin(), s.class_names.end());
    if (unique.size() != s.class_names.size())
      throw ConfigError(spec.path_of("class_names"), "names a class twice");
  }
  const std::string labels = spec.one_of("label_mode", "int", {"int", "categorical", "binary"});
  s.label_mode = labels == "categorical" ? LabelMode::categorical
                 : labels == "binary"    ? LabelMode::binary
                                         : LabelMode::index;
  s.crop_to_aspect_ratio = spec.get_bool("crop_to_aspect_ratio", false);
  s.shuffle = spec.get_bool("shuffle", true);
  s.seed = static_cast<std::uint64_t>(spec.int_in("seed", 0, 0, INT64_MAX));
  s.scale = spec.number_in("scale", 1.0 / 255, 0.0, 1e30, true);
  s.on_bad_file = spec.one_of("on_bad_file", "error", {"error", "skip"}) == "skip"
                      ? BadFilePolicy::skip
                      : BadFilePolicy::error;
  s.workers = static_cast<int>(spec.int_in("workers", 0, 0, kMaxWorkers));
  return s;
}

std::shared_ptr<Dataset> open_images_dataset(const ImagesSpec& spec) {
  Listing listing = spec.list.empty() ? list_folders(spec) : list_file(spec);
  const std::string where = spec.list.empty() ? spec.folder : spec.list;
  if (listing.files.empty())
    throw DataError(where + ": no .jpg, .jpeg or .png files" +
                    (listing.other_files > 0
                         ? " (" + count_of(listing.other_files, "file") + " of other kinds)"
                         : std::string()));
  for (const std::string& name : listing.class_names)
    if (invalid_utf8_at(name) != std::string::npos)
      throw DataError(
          where + ": the class name '" +
          nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
          "' is not UTF-8 text; rename its folder (class names are saved as JSON)");
  if (spec.labeled && spec.label_mode == LabelMode::binary && listing.class_names.size() != 2)
    throw DataError(where + ": label_mode \"binary\" needs exactly 2 classes, there are " +
                    std::to_string(listing.class_names.size()) + " (" +
                    name_list_text(listing.class_names) + ")");
  return std::make_shared<ImageFolderDataset>(spec, std::move(listing));
}

}  // namespace tandem::data
