// The images dataset type against other people's code: files written by PIL, pixels as PIL
// decodes them and resized as PyTorch's interpolate (bilinear, align_corners=False) resizes
// them, through /usr/bin/python3. Then folders, lists, label modes, the seeded order, caching,
// and every kind of bad file and bad spec ending as an error that names it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/data/data_test_util.hpp"
#include "data/datasets.hpp"
#include "data/image_decode.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;
using test::data_error_of;

// Runs Python `code` (numpy as np, PIL's Image, torch imported) in `dir`; fails on an error.
void python(const fs::path& dir, const std::string& code) {
  test::write_text(dir / "make.py",
                   "import json, os, numpy as np, torch\nfrom PIL import Image\n" + code);
  const auto r =
      test::run_command("cd " + dir.string() + " && " + test::system_python() + " make.py");
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

std::shared_ptr<Dataset> open(const json& spec, const fs::path& dir) {
  return make_dataset(spec, "data.train", dir.string());
}

struct Samples {
  std::vector<float> x, y;
};

Samples read_all(const Dataset& d) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(d.size()));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  Samples s;
  s.x.resize(all.size() * shape_size(d.x_shape()));
  s.y.resize(all.size() * std::max<std::int64_t>(1, shape_size(d.y_shape())));
  d.read(all, s.x.data(), s.y.data());
  return s;
}

std::vector<float> read_floats(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<float> v;
  float f = 0;
  while (in.read(reinterpret_cast<char*>(&f), sizeof f)) v.push_back(f);
  return v;
}

// Images of every kind PIL writes that the reader must take: RGB, RGBA, grey, palette (with
// transparency), 16-bit grey PNGs; colour and grey JPEGs; a JPEG four times the target size and
// one just under (decoded DCT-scaled, at the scale PIL's draft picks). The list gives them in
// order, without shuffling.
constexpr const char* kMakeImages = R"(
rng = np.random.default_rng(7)
h, w = 37, 23
rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
alpha = rng.integers(0, 256, (h, w, 1), dtype=np.uint8)
files = {
  'rgb.png': Image.fromarray(rgb, 'RGB'),
  'rgba.png': Image.fromarray(np.concatenate([rgb, alpha], -1), 'RGBA'),
  'grey.png': Image.fromarray(rgb[..., 0], 'L'),
  'palette.png': Image.fromarray(rgb, 'RGB').quantize(16),
  'colour.jpg': Image.fromarray(rgb, 'RGB'),
  'grey.jpg': Image.fromarray(rgb[..., 1], 'L'),
}
for name, im in files.items():
  im.save(name, quality=90) if name.endswith('.jpg') else im.save(name)
big = np.kron(rgb[:16, :16], np.ones((4, 4, 1), dtype=np.uint8))
Image.fromarray(big, 'RGB').save('big.jpg', quality=90)
# Under four times 16 but over twice: PIL's draft decodes it at 1/2 (63 // 16 = 3), not at 1/4
# (whose 16 x 16 would cover the target too).
Image.fromarray(np.ascontiguousarray(big[:63, :63]), 'RGB').save('edge.jpg', quality=90)
grey16 = (rng.integers(0, 65536, (h, w))).astype(np.uint16)
Image.fromarray(grey16.astype(np.int32), 'I').save('grey16.png', bits=16)
# PIL writes mode I as 16-bit when the values fit; read it back to be sure what the file holds.
assert np.array(Image.open('grey16.png')).max() > 255
names = list(files) + ['big.jpg', 'edge.jpg', 'grey16.png']
json.dump([[n, 'c' + str(i % 2)] for i, n in enumerate(names)], open('list.json', 'w'))

def pil(name, mode, size):
  im = Image.open(name)
  if name.endswith('.jpg'):               # DCT scaling (PIL's size is width, height); in
    im.draft('L' if mode == 'L' else 'RGB', (size[1], size[0]))  # grey, the decoder's own luma
  if name == 'grey16.png':
    a = (np.array(im).astype(np.uint32) >> 8).astype(np.uint8)   # the high byte
    a = a[..., None].repeat(4 if mode == 'RGBA' else 3 if mode == 'RGB' else 1, -1)
    if mode == 'RGBA': a[..., 3] = 255
  else:
    a = np.array(im.convert(mode))
  a = a.reshape(a.shape[0], a.shape[1], -1).astype(np.float32)
  t = torch.from_numpy(a).permute(2, 0, 1)[None]
  t = torch.nn.functional.interpolate(t, size=size, mode='bilinear', align_corners=False,
                                      antialias=False)
  return (t[0].permute(1, 2, 0).numpy() / 255).astype(np.float32)

# Keras' smart_resize of rgb.png's first channel to 10x20: its centred 11x23 window, resized.
ch = min(h, int(w * 10 / 20)); top = int((h - ch) / 2)
t = torch.from_numpy(rgb[top:top + ch, :, 0].astype(np.float32))[None, None]
t = torch.nn.functional.interpolate(t, size=(10, 20), mode='bilinear', align_corners=False)
(t.numpy().ravel() / 255).astype(np.float32).tofile('expected-crop.f32')
json.dump([['grey.png', 'x']], open('crop.json', 'w'))

for mode, cm in [('L', 'grayscale'), ('RGB', 'rgb'), ('RGBA', 'rgba')]:
  for size in [(16, 16), (29, 17)]:
    np.concatenate([pil(n, mode, size).ravel() for n in names]).tofile(
        'expected-%s-%dx%d.f32' % (cm, size[0], size[1]))
)";

TEST(ImageDataset, PixelsAreAsPilDecodesThemResizedAsPyTorchAndCroppedAsKeras) {
  const fs::path dir = test::scratch_dir("images-pixels");
  python(dir, kMakeImages);
  for (const char* mode : {"grayscale", "rgb", "rgba"})
    for (const auto& [rows, cols] : {std::pair{16, 16}, std::pair{29, 17}}) {
      SCOPED_TRACE(std::string(mode) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const auto d = open({{"type", "images"},
                           {"list", "list.json"},
                           {"image_size", {rows, cols}},
                           {"color_mode", mode},
                           {"shuffle", false},
                           {"workers", 3}},
                          dir);
      const int channels = std::string(mode) == "grayscale" ? 1
                           : mode == std::string("rgb")     ? 3
                                                            : 4;
      ASSERT_EQ(d->x_shape(), (Shape{rows, cols, channels}));
      ASSERT_EQ(d->size(), 9);
      const std::vector<float> expected =
          read_floats(dir / ("expected-" + std::string(mode) + "-" + std::to_string(rows) + "x" +
                             std::to_string(cols) + ".f32"));
      const Samples got = read_all(*d);
      ASSERT_EQ(got.x.size(), expected.size());
      const std::size_t per = got.x.size() / 9;
      for (std::size_t i = 0; i < got.x.size(); ++i)
        ASSERT_NEAR(got.x[i], expected[i], 2e-6) << "image " << i / per << ", value " << i % per;
      EXPECT_EQ(got.y, (std::vector<float>{0, 1, 0, 1, 0, 1, 0, 1, 0}));
      EXPECT_EQ(d->class_names(), (std::vector<std::string>{"c0", "c1"}));
    }
  // crop_to_aspect_ratio: Keras' smart_resize, the largest centred window of the target's
  // aspect ratio, then resized.
  const auto crop = open({{"type", "images"},
                          {"list", "crop.json"},
                          {"image_size", {10, 20}},
                          {"color_mode", "grayscale"},
                          {"crop_to_aspect_ratio", true}},
                         dir);
  const std::vector<float> expected = read_floats(dir / "expected-crop.f32");
  const Samples got = read_all(*crop);
  ASSERT_EQ(got.x.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(got.x[i], expected[i], 2e-6) << i;
}

// A folder per class: files found recursively, hidden ones and other kinds left out, classes
// sorted (or in the order class_names gives), labels as indices, one-hot or binary.
TEST(ImageDataset, ClassFoldersGiveSortedClassesAndEachLabelMode) {
  const fs::path dir = test::scratch_dir("images-folders");
  python(dir,
         "for c, n in [('dog', 3), ('cat', 2), ('bird', 1)]:\n"
         "  os.makedirs('pets/%s/more' % c, exist_ok=True)\n"
         "  for i in range(n):\n"
         "    sub = 'more/' if i == 0 else ''\n"
         "    Image.fromarray(np.full((4, 4), 10 * len(c) + i, np.uint8), 'L')"
         ".save('pets/%s/%s%d.png' % (c, sub, i))\n"
         "open('pets/dog/notes.txt', 'w').write('not an image')\n"
         "Image.fromarray(np.zeros((4, 4), np.uint8)).save('pets/dog/.hidden.png')\n"
         "os.makedirs('pets/.cache')\n");
  json spec = {{"type", "images"},
               {"path", "pets"},
               {"image_size", {4, 4}},
               {"color_mode", "grayscale"},
               {"shuffle", false}};
  auto d = open(spec, dir);
  EXPECT_EQ(d->class_names(), (std::vector<std::string>{"bird", "cat", "dog"}));
  EXPECT_EQ(d->size(), 6);
  EXPECT_EQ(d->y_shape(), Shape{});
  EXPECT_NE(d->describe().find("6 files, 3 classes, 4x4 grayscale, 1 file of other kinds ignored"),
            std::string::npos)
      << d->describe();
  Samples s = read_all(*d);
  EXPECT_EQ(s.y, (std::vector<float>{0, 1, 1, 2, 2, 2}));
  // Sorted paths inside a class: cat/1.png before cat/more/0.png.
  EXPECT_FLOAT_EQ(s.x[16], 31.0f / 255);
  EXPECT_FLOAT_EQ(s.x[32], 30.0f / 255);

  spec["class_names"] = {"dog", "cat", "bird"};
  spec["label_mode"] = "categorical";
  d = open(spec, dir);
  EXPECT_EQ(d->y_shape(), Shape{3});
  s = read_all(*d);
  EXPECT_EQ(std::vector<float>(s.y.begin(), s.y.begin() + 6),
            (std::vector<float>{1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(std::vector<float>(s.y.end() - 3, s.y.end()), (std::vector<float>{0, 0, 1}));

  spec["class_names"] = {"dog", "cat"};
  std::string msg = data_error_of([&] { open(spec, dir); });
  EXPECT_NE(
      msg.find("class_names 'dog', 'cat' do not match its class folders 'bird', 'cat', 'dog'"),
      std::string::npos)
      << msg;
  spec.erase("class_names");
  spec["label_mode"] = "binary";
  msg = data_error_of([&] { open(spec, dir); });
  EXPECT_NE(msg.find("label_mode \"binary\" needs exactly 2 classes, there are 3"),
            std::string::npos)
      << msg;
}

// "labels": null (Keras' labels=None): every image under the folder, sub-folders included,
// sorted (then shuffled when asked), as data without targets; "inferred" is the default.
TEST(ImageDataset, AFolderWithoutLabelsIsEveryImageInItAsDataToPredict) {
  const fs::path dir = test::scratch_dir("images-unlabeled");
  python(dir,
         "os.makedirs('new/more'); os.makedirs('new/.thumbs')\n"
         "for i, name in enumerate(['b.png', 'a.png', 'more/c.png']):\n"
         "  Image.fromarray(np.full((4, 4), 10 + i, np.uint8), 'L').save('new/' + name)\n"
         "Image.fromarray(np.zeros((4, 4), np.uint8), 'L').save('new/.thumbs/t.png')\n"
         "open('new/readme.txt', 'w').write('x')\n");
  json spec = {{"type", "images"},  {"path", "new"},    {"image_size", {4, 4}},
               {"labels", nullptr}, {"shuffle", false}, {"color_mode", "grayscale"}};
  auto d = open(spec, dir);
  EXPECT_EQ(d->size(), 3);
  EXPECT_FALSE(d->labeled());
  EXPECT_TRUE(d->class_names().empty());
  EXPECT_NE(d->describe().find("3 files, unlabeled, 4x4 grayscale, 1 file of other kinds ignored"),
            std::string::npos)
      << d->describe();
  std::vector<std::string> files;
  for (std::int64_t i = 0; i < d->size(); ++i)
    files.push_back(fs::relative(d->sample_file(i), dir).string());
  EXPECT_EQ(files, (std::vector<std::string>{"new/a.png", "new/b.png", "new/more/c.png"}));
  std::vector<std::int64_t> all{0, 1, 2};
  std::vector<float> x(3 * 16);
  d->read(all, x.data(), nullptr);  // no targets: nothing is written into y
  EXPECT_FLOAT_EQ(x[0], 11.0f / 255);
  EXPECT_FLOAT_EQ(x[16], 10.0f / 255);
  EXPECT_FLOAT_EQ(x[32], 12.0f / 255);
  spec["labels"] = "inferred";  // Keras' default: the class folders, here "more" alone
  d = open(spec, dir);
  EXPECT_EQ(d->class_names(), std::vector<std::string>{"more"});
  EXPECT_EQ(d->size(), 1);
}

// Integer labels in a list are class indices, as Keras takes them: the classes sorted by value
// (they used to sort as text, so label 2 trained as class 4 of 0, 1, 10, 11, 2, ...).
TEST(ImageDataset, IntegerLabelsOfAListSortByValue) {
  const fs::path dir = test::scratch_dir("images-int-labels");
  python(dir,
         "labels = [0, 1, 2, 10, 11, 2]\n"
         "for i, l in enumerate(labels):\n"
         "  Image.fromarray(np.full((2, 2), i, np.uint8), 'L').save('%d.png' % i)\n"
         "json.dump([['%d.png' % i, l] for i, l in enumerate(labels)], open('list.json', 'w'))\n");
  const json spec = {{"type", "images"},      {"path", "."},
                     {"list", "list.json"},   {"image_size", {2, 2}},
                     {"color_mode", "grayscale"}, {"shuffle", false}};
  auto d = open(spec, dir);
  EXPECT_EQ(d->class_names(), (std::vector<std::string>{"0", "1", "2", "10", "11"}));
  EXPECT_EQ(read_all(*d).y, (std::vector<float>{0, 1, 2, 3, 4, 2}));
}

// An image that cannot be opened says so (it was called "an empty file").
TEST(ImageDataset, AFileThatCannotBeOpenedSaysSo) {
  if (::geteuid() == 0) GTEST_SKIP() << "root opens every file";
  const fs::path dir = test::scratch_dir("images-unreadable");
  python(dir,
         "os.makedirs('c/a')\n"
         "Image.fromarray(np.zeros((2, 2), np.uint8), 'L').save('c/a/x.png')\n"
         "os.chmod('c/a/x.png', 0)\n");
  const std::string msg = data_error_of([&] {
    open({{"type", "images"}, {"path", "c"}, {"image_size", {2, 2}}}, dir);
  });
  EXPECT_NE(msg.find("x.png: cannot open (Permission denied)"), std::string::npos) << msg;
}

// The files' order is a seeded shuffle: the same for a seed, another for another seed, and the
// validation split (the last fraction) therefore holds every class.
TEST(ImageDataset, TheOrderIsASeededShuffleAndCachingChangesNoValue) {
  const fs::path dir = test::scratch_dir("images-order");
  python(dir,
         "for c in range(4):\n"
         "  os.makedirs('d/c%d' % c)\n"
         "  for i in range(25):\n"
         "    Image.fromarray(np.full((3, 5), c * 25 + i, np.uint8), 'L').save('d/c%d/%02d.png' % "
         "(c, i))\n");
  const json spec = {{"type", "images"},
                     {"path", "d"},
                     {"image_size", {3, 5}},
                     {"color_mode", "grayscale"},
                     {"seed", 11}};
  const Samples a = read_all(*open(spec, dir)), b = read_all(*open(spec, dir));
  EXPECT_EQ(a.x, b.x);
  json other = spec;
  other["seed"] = 12;
  EXPECT_NE(read_all(*open(other, dir)).x, a.x);
  std::set<float> last_classes(a.y.end() - 20, a.y.end());
  EXPECT_EQ(last_classes.size(), 4u);
  json cached = spec;
  cached["cache"] = true;
  const auto c = open(cached, dir);
  EXPECT_NE(c->describe().find("cached in memory"), std::string::npos);
  // Twice, in another order: the second read comes from the cache.
  std::vector<std::int64_t> idx = {5, 99, 0, 5};
  std::vector<float> x1(4 * 15), y1(4), x2(4 * 15), y2(4);
  c->read(idx, x1.data(), y1.data());
  c->read(idx, x2.data(), y2.data());
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(std::vector<float>(x1.begin(), x1.begin() + 15),
            std::vector<float>(a.x.begin() + 5 * 15, a.x.begin() + 6 * 15));
  EXPECT_EQ(y1[1], a.y[99]);
}

// Every kind of bad file: an error naming it, or under "skip" left out and counted.
TEST(ImageDataset, BadFilesStopTheRunNamingThemOrAreSkippedAndCounted) {
  const fs::path dir = test::scratch_dir("images-bad");
  python(dir,
         "os.makedirs('d/a'); os.makedirs('d/b')\n"
         "for i in range(4):\n"
         "  Image.fromarray(np.full((8, 8), 40 * i, np.uint8), 'L').save('d/a/%d.jpg' % i, "
         "quality=95)\n"
         "  Image.fromarray(np.full((8, 8), 40 * i + 1, np.uint8), 'L').save('d/b/%d.png' % i)\n"
         "open('d/a/text.jpg', 'w').write('this is not an image')\n"
         "Image.fromarray(np.zeros((8, 8), np.uint8), 'L').save('d/b/gif.png', format='GIF')\n"
         "j = open('d/a/0.jpg', 'rb').read(); open('d/a/cut.jpg', 'wb').write(j[:len(j) // 2])\n"
         "p = open('d/b/0.png', 'rb').read(); open('d/b/cut.png', 'wb').write(p[:len(p) - 20])\n"
         "open('d/b/empty.png', 'w').close()\n");
  json spec = {{"type", "images"},
               {"path", "d"},
               {"image_size", {8, 8}},
               {"color_mode", "grayscale"},
               {"shuffle", false}};
  std::string msg = data_error_of([&] { open(spec, dir); });
  EXPECT_NE(msg.find("d/a/text.jpg: neither JPEG nor PNG"), std::string::npos) << msg;
  EXPECT_NE(msg.find("on_bad_file \"skip\""), std::string::npos) << msg;

  // Only truncated files: they open (their first bytes are right) and fail in the decoder.
  fs::remove(dir / "d/a/text.jpg");
  fs::remove(dir / "d/b/gif.png");
  fs::remove(dir / "d/b/empty.png");
  auto d = open(spec, dir);
  msg = data_error_of([&] { read_all(*d); });
  EXPECT_TRUE(msg.find("d/a/cut.jpg: a corrupt or truncated JPEG") != std::string::npos ||
              msg.find("d/b/cut.png: a corrupt or truncated PNG") != std::string::npos)
      << msg;

  test::write_text(dir / "d/a/text.jpg", "this is not an image");
  python(dir,
         "Image.fromarray(np.zeros((8, 8), np.uint8), 'L').save('d/b/gif.png', format='GIF')\n"
         "open('d/b/empty.png', 'w').close()\n");
  spec["on_bad_file"] = "skip";
  d = open(spec, dir);
  // 12 files listed, 3 left out at once (text, GIF, empty), 2 when decoded (cut.jpg, cut.png).
  EXPECT_EQ(d->size(), 10);
  EXPECT_EQ(d->skipped_files(), 3);
  EXPECT_NE(d->describe().find("3 unreadable files left out"), std::string::npos) << d->describe();
  const Samples s = read_all(*d);
  EXPECT_EQ(d->skipped_files(), 5);
  // In sorted order: a/0 a/1 a/2 a/3 a/cut b/0 b/1 b/2 b/3 b/cut; cut.jpg's place takes b/0,
  // cut.png's place wraps round to a/0 (the next samples that decode), labels with them.
  EXPECT_EQ(s.y, (std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1, 1, 0}));
  EXPECT_FLOAT_EQ(s.x[4 * 64], 1.0f / 255);
  EXPECT_NEAR(s.x[9 * 64], 0.0f, 2.0f / 255);  // a/0.jpg: 0 up to JPEG's rounding
}

// A PNG declaring more pixels than Tandem decodes says its size, as a JPEG's does (it was "a
// corrupt or truncated PNG"): it is neither.
TEST(ImageDataset, AnImageTooLargeToDecodeSaysItsSize) {
  const fs::path dir = test::scratch_dir("images-large");
  python(dir,
         "import struct, zlib\n"
         "def chunk(kind, body):\n"
         "  return struct.pack('>I', len(body)) + kind + body + "
         "struct.pack('>I', zlib.crc32(kind + body))\n"
         "ihdr = struct.pack('>IIBBBBB', 30000, 30000, 8, 0, 0, 0, 0)\n"
         "open('big.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', ihdr) + "
         "chunk(b'IDAT', zlib.compress(b'\\0' * 30001)) + chunk(b'IEND', b''))\n");
  std::ifstream in(dir / "big.png", std::ios::binary);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  const std::string msg =
      data_error_of([&] { data::decode_image(bytes, data::ColorMode::grayscale, "big.png"); });
  EXPECT_NE(msg.find("big.png: the image is 30000x30000 pixels; expected at least 1x1 and at "
                     "most 268435456 pixels"),
            std::string::npos)
      << msg;
}

TEST(ImageDataset, BadSpecsAndListsAreErrorsNamingThePlace) {
  const fs::path dir = test::scratch_dir("images-specs");
  python(
      dir,
      "os.makedirs('d/a'); os.makedirs('flat'); os.makedirs('none/a')\n"
      "Image.fromarray(np.zeros((4, 4), np.uint8), 'L').save('d/a/0.png')\n"
      "Image.fromarray(np.zeros((4, 4), np.uint8), 'L').save('flat/0.png')\n"
      "open('none/a/x.txt', 'w').write('x')\n"
      "open('nolabel.csv', 'w').write('file,class\\nd/a/0.png,a\\n')\n"
      "open('badlabel.csv', 'w').write('path,label\\nd/a/0.png,a\\nd/a/1.png,b\\n')\n"
      "open('nolabel2.csv', 'w').write('path,label\\nd/a/0.png,a\\nd/a/1.png,\\n')\n"
      "open('nolabel.json', 'w').write('[[\"d/a/0.png\", \"\"]]')\n"
      "open('twice.csv', 'w').write('path,label\\nd/a/0.png,a\\n./d/a/0.png,b\\n')\n"
      "open('missing.csv', 'w').write('path,label\\nd/a/0.png,a\\nd/a/gone.png,a\\n')\n"
      "open('bad.json', 'w').write('[[\"d/a/0.png\", \"a\"], [\"d/a/0.png\"]]')\n"
      "open('broken.json', 'w').write('[[\"d/a/0.png\", ')\n"
      "open('nul.json', 'w').write('[[\"d/a/0.png\", \"a\"], [\"d/a/0\\\\u0000png\", \"a\"]]')\n");
  const auto error_of = [&](json extra) {
    json spec = {{"type", "images"}, {"image_size", {4, 4}}};
    spec.update(extra);
    try {
      open(spec, dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"path", "flat"}}, "flat: no class folders in it"},
      {{{"path", "none"}}, "none: no .jpg, .jpeg or .png files (1 file of other kinds)"},
      {{{"path", "d/a/0.png"}}, "d/a/0.png: a file, not a folder of class folders"},
      {{{"path", "gone"}}, "gone: file not found"},
      {{{"list", "nolabel.csv"}}, "nolabel.csv: the header needs the columns 'path' and 'label'"},
      {{{"list", "badlabel.csv"}, {"class_names", {"a"}}},
       "badlabel.csv, row 3: the label 'b' is not one of class_names 'a'"},
      {{{"list", "missing.csv"}}, "d/a/gone.png: file not found"},
      {{{"list", "nolabel2.csv"}}, "nolabel2.csv, row 3: an empty label"},
      {{{"list", "nolabel.json"}}, "nolabel.json[0]: an empty label"},
      {{{"list", "twice.csv"}},
       "twice.csv, row 3: './d/a/0.png' has the label 'b', but 'a' at row 2;"},
      {{{"list", "bad.json"}}, "bad.json[1]: expected [path, label]"},
      {{{"list", "broken.json"}}, "broken.json: not valid JSON"},
      {{{"list", "nul.json"}}, "nul.json[1]: the path holds a NUL character"},
      {{{"path", "d"}, {"image_size", {0, 4}}}, "'data.train.image_size': expected [rows, cols]"},
      {{{"path", "d"}, {"image_size", {4}}}, "'data.train.image_size': expected [rows, cols]"},
      {{{"path", "d"}, {"color_mode", "cmyk"}}, "'data.train.color_mode'"},
      {{{"path", "d"}, {"on_bad_file", "ignore"}}, "'data.train.on_bad_file'"},
      {{{"path", "d"}, {"workers", -1}}, "'data.train.workers'"},
      {{{"path", "d"}, {"class_names", {"a", "a"}}},
       "'data.train.class_names': names a class twice"},
      {{{"path", "d"}, {"interpolation", "lanczos"}}, "'data.train.interpolation'"},
      {{{"path", "d"}, {"cache", "yes"}}, "'data.train.cache'"},
      {{{"path", "d"}, {"labels", 5}}, "'data.train.labels'"},
      {{{"path", "d"}, {"labels", "folders"}},
       "'data.train.labels': expected \"inferred\" (labels from the class folders) or null"},
      {{{"list", "badlabel.csv"}, {"labels", nullptr}},
       "'data.train.labels': null with a \"list\""},
      {{{"path", "d"}, {"labels", nullptr}, {"class_names", {"a"}}},
       "'data.train.class_names': given with \"labels\": null"},
      {{{"path", "d/a/0.png"}, {"labels", nullptr}}, "d/a/0.png: a file, not a folder of images"},
      {{{"path", "none"}, {"labels", nullptr}},
       "none: no .jpg, .jpeg or .png files (1 file of other kinds)"},
  };
  for (const auto& [extra, expected] : cases)
    EXPECT_NE(error_of(extra).find(expected), std::string::npos)
        << extra.dump() << " gave: " << error_of(extra);
}

}  // namespace
}  // namespace tandem
