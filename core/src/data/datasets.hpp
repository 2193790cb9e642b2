// Private to the data module: the dataset kinds behind make_dataset(), their parsed specs, and
// the lower-level pieces tests reach into (IDX decoding, HDF5 cache tuning and counters).
//
// Each kind has parse_*_spec(), which reads its keys from a ConfigObject (ConfigError on a bad
// spec, no file access), and open_*_dataset(), which touches the data (DataError on bad data).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/config_object.hpp"
#include "data/dataset.hpp"
#include "util/internal_api.hpp"

TANDEM_INTERNAL_API_BEGIN

namespace tandem::data {

/// `file` resolved against `base_dir` when relative (and base_dir is not empty).
std::string resolve_path(const std::string& base_dir, const std::string& file);

/// The required `key` of a spec: one name (a string) or a non-empty list of them; ConfigError at
/// the key (or the list item) otherwise, saying "expected a <what>, or a list of them<list_hint>".
std::vector<std::string> name_list(ConfigObject& spec, const std::string& key,
                                   const std::string& what, const std::string& list_hint = "");

/// `parent` keeping each sample in memory once read ("cache": true). Throws ConfigError at `path`
/// when all samples would take more than 80% of the machine's memory.
std::shared_ptr<Dataset> make_cached(std::shared_ptr<const Dataset> parent, const std::string& path);

// ---- idx --------------------------------------------------------------------------------------

/// A decoded IDX file. Bytes (type 0x08/0x09) stay as bytes; wider types are decoded to float.
struct IdxArray {
  std::string file;
  int type_code = 0;  // 0x08 ubyte, 0x09 byte, 0x0B short, 0x0C int, 0x0D float, 0x0E double
  Shape dims;         // dims[0] = samples
  std::vector<std::uint8_t> bytes;
  std::vector<float> values;
};

/// Reads a whole IDX file, gzip-compressed or plain. Throws DataError naming the file.
IdxArray read_idx_file(const std::string& file);

struct IdxSpec {
  std::string x_file;
  std::string y_file;
  std::optional<double> scale;  // default: 1/255 for ubyte x, 1 otherwise
};
IdxSpec parse_idx_spec(ConfigObject& spec, const std::string& base_dir);
std::shared_ptr<Dataset> open_idx_dataset(const IdxSpec& spec);

// ---- hdf5 -------------------------------------------------------------------------------------

// HDF5 calls hold tandem::hdf5_mutex() (io/hdf5_lock.hpp), shared with checkpoint I/O.

struct Hdf5Spec {
  std::string file;
  // Several names: one array per model input (or output), packed in this order (Dataset).
  std::vector<std::string> x_names{"x"};
  std::vector<std::string> y_names{"y"};  // none: no targets ("y": null, data to predict)
  std::string weight_name;  // "sample_weight": a weight per sample or per position; empty: none
};
/// How the reader trades memory for I/O.
struct Hdf5ReadOptions {
  std::int64_t whole_limit_bytes = std::int64_t{64} << 20;  // load x and y whole below this
  std::int64_t block_bytes = std::int64_t{4} << 20;         // target size of a cached row block
  int cache_blocks = 4;                                     // LRU capacity, in blocks
};
/// Counters, for tests and diagnostics.
struct Hdf5Stats {
  bool whole = false;            // loaded whole at open
  std::int64_t block_rows = 0;   // rows per cached block
  std::int64_t block_loads = 0;  // blocks read into the cache
  std::int64_t block_hits = 0;   // rows served from the cache
  std::int64_t direct_rows = 0;  // rows read directly (scattered access)
};
Hdf5Spec parse_hdf5_spec(ConfigObject& spec, const std::string& base_dir);
std::shared_ptr<Dataset> open_hdf5_dataset(const Hdf5Spec& spec, Hdf5ReadOptions options = {});
/// Counters of a dataset made by open_hdf5_dataset(); nullopt for any other dataset.
std::optional<Hdf5Stats> hdf5_stats(const Dataset& dataset);

// ---- npy, npz (NumPy) -------------------------------------------------------------------------

struct NpySpec {
  bool npz = false;
  std::string archive;  // npz: the .npz file
  std::string x, y;     // npy: the .npy files; npz: the arrays' names (default "x", "y");
                        // y empty: no targets (data to predict)
  std::optional<double> scale;  // default: 1/255 for uint8 x, 1 otherwise
  /// Arrays up to this many bytes are read whole when the dataset opens (as np.load reads
  /// them); larger ones row by row from disk as the run goes. Not a config key: tests set it.
  std::uint64_t whole_limit_bytes = std::uint64_t{256} << 20;
};
/// {"type": "npy", "x": FILE, "y": FILE} or {"type": "npz", "path": FILE, "x": NAME, "y": NAME}.
NpySpec parse_npy_spec(ConfigObject& spec, const std::string& base_dir, bool npz);
std::shared_ptr<Dataset> open_npy_dataset(const NpySpec& spec);

// ---- csv ---------------------------------------------------------------------------------------

struct CsvSpec {
  std::string file;
  std::vector<std::string> y;  // target columns
  std::vector<std::string> x;  // feature columns; empty: every column not in y
  char delimiter = ',';
  // Columns of strings and their values, in index order: "red" → its position.
  std::map<std::string, std::vector<std::string>> categories;
};
/// {"type": "csv", "path": FILE, "y": COLUMN(S), "x": [COLUMNS], "delimiter": ",",
///  "categories": {COLUMN: [VALUES]}}.
CsvSpec parse_csv_spec(ConfigObject& spec, const std::string& base_dir);
std::shared_ptr<Dataset> open_csv_dataset(const CsvSpec& spec);

// ---- images (JPEG, PNG) ------------------------------------------------------------------------

enum class LabelMode { index, categorical, binary };
enum class BadFilePolicy { error, skip };

struct ImagesSpec {
  std::string folder;     // one sub-folder per class; with `list`: where its paths start
  std::string list;       // a CSV (path,label) or JSON list of files and labels; empty: folders
  std::vector<std::string> class_names;  // given: these classes in this order; empty: sorted
  // false for "labels": null (Keras' labels=None): every image under `folder`, no targets.
  bool labeled = true;
  int rows = 256, cols = 256;             // image_size
  int color_mode = 1;     // ColorMode (data/image_decode.hpp): 0 grayscale, 1 rgb, 2 rgba
  bool crop_to_aspect_ratio = false;
  LabelMode label_mode = LabelMode::index;
  bool shuffle = true;     // the files' order (validation_split takes its last fraction)
  std::uint64_t seed = 0;
  double scale = 1.0 / 255;
  BadFilePolicy on_bad_file = BadFilePolicy::error;
  int workers = 0;         // decoding threads; 0: one per core
};
/// {"type": "images", "path": FOLDER, "image_size": [rows, cols], "color_mode": ..., ...}
/// (docs/data.md).
ImagesSpec parse_images_spec(ConfigObject& spec, const std::string& base_dir);
/// Lists the files (and checks each starts like a JPEG or PNG) without decoding them.
std::shared_ptr<Dataset> open_images_dataset(const ImagesSpec& spec);

// ---- synthetic --------------------------------------------------------------------------------

/// binary, classes, regression: x uniform in [0, 1), y random labels or values (throughput
/// and plumbing only: nothing to learn). repeated_token: a task that needs attention — x a
/// sequence of token ids in [1, vocabulary), y 1 when the first token appears again later in
/// the sequence, else 0 (half the samples each, at random). sentence_pair: BERT's two-segment
/// input — two arrays per sample, the tokens and their segment ids (0 for segment A, 1 for B,
/// split at random) — y 1 when A's first token appears in B; repeats inside A do not count.
enum class SyntheticTask { binary, classes, regression, repeated_token, sentence_pair };

struct SyntheticSpec {
  std::int64_t samples = 0;
  Shape x_shape;
  SyntheticTask task = SyntheticTask::binary;
  std::int64_t classes = 10;
  std::int64_t vocabulary = 0;  // the token tasks' ids are in [1, vocabulary)
  // x_shape: per array; a sentence pair's two arrays are packed into 2 x_shape[0] values.
  Shape y_shape;  // {} for classes, default {1} otherwise
  std::uint64_t seed = 0;
};
SyntheticSpec parse_synthetic_spec(ConfigObject& spec);
std::shared_ptr<Dataset> make_synthetic_dataset(const SyntheticSpec& spec);

}  // namespace tandem::data

TANDEM_INTERNAL_API_END
