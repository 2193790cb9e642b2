// The npy and npz dataset types against files NumPy itself writes (/usr/bin/python3): every
// number dtype in both byte orders, .npy files and .npz archives stored and deflated, shapes,
// and each kind of bad file ending as a DataError that names it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "data/datasets.hpp"
#include "data/npy_format.hpp"
#include "tandem/error.hpp"
#include "core/data/data_test_util.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;

// Runs Python `code` with NumPy imported as np, in folder `dir`; fails the test on an error.
void numpy(const fs::path& dir, const std::string& code) {
  test::write_text(dir / "make.py", "import json, numpy as np\n" + code);
  const auto r =
      test::run_command("cd " + dir.string() + " && " + test::system_python() + " make.py");
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

std::shared_ptr<Dataset> open(const json& spec, const fs::path& dir) {
  return make_dataset(spec, "data.train", dir.string());
}

std::vector<float> read_x(const Dataset& d) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(d.size()));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  std::vector<float> x(all.size() * shape_size(d.x_shape()));
  std::vector<float> y(all.size() * std::max<std::int64_t>(1, shape_size(d.y_shape())));
  d.read(all, x.data(), y.data());
  return x;
}

using test::data_error_of;

TEST(NpyDataset, EveryNumberDtypeNumPyWritesReadsAsNumPyConvertsIt) {
  const fs::path dir = test::scratch_dir("npy-dtypes");
  const std::vector<std::string> dtypes = {"<f4", ">f4", "<f8", ">f8", "<f2", ">f2", "|u1", "|i1",
                                           "<u2", ">i2", "<u4", ">i4", "<u8", "<i8", ">i8", "|b1"};
  std::string list;
  for (const auto& d : dtypes) list += "'" + d + "',";
  // Values each dtype holds exactly (unsigned ones without the negative ones); NumPy's own
  // float32 conversion is the reference.
  numpy(dir,
        "expected = {}\n"
        "for i, d in enumerate([" +
            list +
            "]):\n"
            "    base = np.array([[-3, -1.5, 0, 0.25], [1, 2.5, 100, 255]])\n"
            "    kind = np.dtype(d).kind\n"
            "    if kind in 'iu': base = np.round(base)\n"
            "    if kind == 'u': base = np.abs(base)\n"
            "    if kind == 'i' and np.dtype(d).itemsize == 1: base = np.clip(base, -128, 127)\n"
            "    a = base.astype(d)\n"
            "    np.save('a%d.npy' % i, a)\n"
            "    expected[d] = a.astype(np.float32).ravel().tolist()\n"
            "np.save('y.npy', np.array([0, 1], dtype=np.int64))\n"
            "json.dump(expected, open('expected.json', 'w'))\n");
  const json expected = json::parse(test::read_text(dir / "expected.json"));
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    SCOPED_TRACE(dtypes[i]);
    const auto d = open(
        {{"type", "npy"}, {"x", "a" + std::to_string(i) + ".npy"}, {"y", "y.npy"}, {"scale", 1.0}},
        dir);
    ASSERT_EQ(d->size(), 2);
    EXPECT_EQ(d->x_shape(), (Shape{4}));
    EXPECT_EQ(d->y_shape(), Shape{});
    EXPECT_EQ(read_x(*d), expected[dtypes[i]].get<std::vector<float>>());
  }
}

TEST(NpyDataset, NpzArchivesStoredAndDeflatedReadTheSameAndShapesFollowTheArrays) {
  const fs::path dir = test::scratch_dir("npz");
  numpy(dir,
        "x = (np.arange(5 * 2 * 3) % 256).astype(np.uint8).reshape(5, 2, 3)\n"
        "y = np.arange(10, dtype=np.float32).reshape(5, 2)\n"
        "np.savez('stored.npz', x=x, y=y, extra=np.zeros(3))\n"
        "np.savez_compressed('deflated.npz', images=x, targets=y)\n");
  const auto stored = open({{"type", "npz"}, {"path", "stored.npz"}}, dir);
  const auto deflated =
      open({{"type", "npz"}, {"path", "deflated.npz"}, {"x", "images"}, {"y", "targets"}}, dir);
  for (const auto& d : {stored, deflated}) {
    EXPECT_EQ(d->size(), 5);
    EXPECT_EQ(d->x_shape(), (Shape{2, 3}));
    EXPECT_EQ(d->y_shape(), (Shape{2}));
  }
  const std::vector<float> x = read_x(*stored);
  EXPECT_EQ(x, read_x(*deflated));
  // uint8 x is scaled to [0, 1] by default, as IDX images are.
  EXPECT_FLOAT_EQ(x[7], 7.0f / 255.0f);
  EXPECT_NE(stored->describe().find("stored.npz"), std::string::npos);
  EXPECT_NE(stored->describe().find("5 samples"), std::string::npos);
  // y values as stored.
  std::vector<float> xs(6), ys(2);
  const std::int64_t four = 4;
  deflated->read(std::span(&four, 1), xs.data(), ys.data());
  EXPECT_EQ(ys, (std::vector<float>{8, 9}));
}

TEST(NpyDataset, EachKindOfBadFileIsADataErrorNamingIt) {
  const fs::path dir = test::scratch_dir("npy-bad");
  numpy(dir,
        "np.save('y.npy', np.arange(3))\n"
        "np.save('object.npy', np.array([{}, 1, 'a'], dtype=object), allow_pickle=True)\n"
        "np.save('fortran.npy', np.asfortranarray(np.ones((3, 2), np.float32)))\n"
        "np.save('strings.npy', np.array(['a', 'b', 'c']))\n"
        "np.save('complex.npy', np.ones(3, np.complex64))\n"
        "np.save('structured.npy', np.zeros(3, dtype=[('a', '<f4'), ('b', '<i4')]))\n"
        "np.save('scalar.npy', np.float32(1))\n"
        "np.save('empty.npy', np.zeros((0, 4), np.float32))\n"
        "np.save('four.npy', np.zeros((4, 2), np.float32))\n"
        "good = open('four.npy', 'rb').read()\n"
        "open('truncated.npy', 'wb').write(good[:-3])\n"
        "open('trailing.npy', 'wb').write(good + b'xx')\n"
        "open('magic.npy', 'wb').write(b'NOTNUMPY' + good[8:])\n"
        "open('huge.npy', 'wb').write(good.replace(b'(4, 2)', b'(99999, 2)'))\n"
        "np.savez('archive.npz', x=np.zeros((3, 2)), labels=np.arange(3))\n"
        "np.savez_compressed('packed.npz', x=np.arange(3000.0).reshape(3, 1000), y=np.arange(3))\n"
        "raw = bytearray(open('packed.npz', 'rb').read())\n"
        "at = raw.find(b'x.npy') + 200\n"
        "raw[at:at + 8] = b'\\x00' * 8\n"
        "open('corrupt.npz', 'wb').write(bytes(raw))\n"
        "open('notzip.npz', 'wb').write(b'PK this is no zip file at all')\n"
        "import io, zipfile\n"
        "with zipfile.ZipFile('twice.npz', 'w') as z:\n"
        "    for name, a in (('x.npy', np.zeros(3)), ('x.npy', np.ones(3)), ('y.npy', "
        "np.arange(3))):\n"
        "        b = io.BytesIO(); np.save(b, a); z.writestr(name, b.getvalue())\n");
  auto error_of = [&](const std::string& x, const std::string& y = "y.npy") {
    return data_error_of([&] { open({{"type", "npy"}, {"x", x}, {"y", y}}, dir); });
  };
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  std::string e = error_of("object.npy");
  EXPECT_TRUE(has(e, "object.npy") && has(e, "object array")) << e;
  e = error_of("fortran.npy");
  EXPECT_TRUE(has(e, "fortran.npy") && has(e, "Fortran order") && has(e, "ascontiguousarray")) << e;
  EXPECT_TRUE(has(error_of("strings.npy"), "an array of strings")) << error_of("strings.npy");
  EXPECT_TRUE(has(error_of("complex.npy"), "complex numbers"));
  EXPECT_TRUE(has(error_of("structured.npy"),
                  "a structured dtype (a list of fields), which Tandem does not read; save one "
                  "numeric array per file instead"))
      << error_of("structured.npy");
  EXPECT_TRUE(has(error_of("scalar.npy"), "a scalar"));
  EXPECT_TRUE(has(error_of("empty.npy"), "no samples"));
  e = error_of("truncated.npy", "four.npy");
  EXPECT_TRUE(has(e, "truncated.npy") && has(e, "truncated: the header promises 32 bytes")) << e;
  EXPECT_TRUE(has(error_of("trailing.npy", "four.npy"), "trailing data"));
  EXPECT_TRUE(has(error_of("magic.npy"), "not a .npy file"));
  EXPECT_TRUE(has(error_of("huge.npy"), "truncated")) << error_of("huge.npy");
  e = error_of("four.npy");
  EXPECT_TRUE(has(e, "4 samples") && has(e, "3; they must match")) << e;
  EXPECT_TRUE(has(error_of("no-such.npy"), "no-such.npy"));
  EXPECT_TRUE(has(error_of("."), "folder"));

  auto npz_error_of = [&](const std::string& file) {
    return data_error_of([&] { open({{"type", "npz"}, {"path", file}}, dir); });
  };
  e = npz_error_of("archive.npz");
  EXPECT_TRUE(has(e, "archive.npz") && has(e, "has no array 'y' (it has 'x', 'labels')")) << e;
  e = npz_error_of("corrupt.npz");
  EXPECT_TRUE(has(e, "corrupt.npz") && has(e, "corrupt")) << e;
  EXPECT_TRUE(has(npz_error_of("notzip.npz"), "not a .npz file"));
  e = npz_error_of("twice.npz");  // NumPy reads the last copy, a zip reader the first
  EXPECT_TRUE(has(e, "twice.npz': array 'x' is in the archive 2 times")) << e;
  EXPECT_TRUE(has(npz_error_of("y.npy"), "not a .npz file"));
}

// A data file rewritten in place during a run (np.save truncates the file it writes) used to be
// memory-mapped: the next sample past the new end killed the run with SIGBUS, and a rewrite of
// the same size mixed two versions' samples silently. Files read row by row (those above the
// whole-read limit, 0 here) now say the file changed; files read whole keep what they read.
TEST(NpyDataset, AFileRewrittenWhileARunReadsItIsADataErrorNotACrash) {
  const fs::path dir = test::scratch_dir("npy-rewritten");
  numpy(dir,
        "np.save('x.npy', np.arange(4000, dtype=np.float32).reshape(1000, 4))\n"
        "np.save('y.npy', np.arange(1000))\n"
        "np.savez('stored.npz', x=np.ones((1000, 4), np.float32), y=np.arange(1000))\n");
  const auto row_by_row = [&](bool npz) {
    data::NpySpec s;
    s.npz = npz;
    if (npz) {
      s.archive = (dir / "stored.npz").string();
      s.x = "x", s.y = "y";
    } else {
      s.x = (dir / "x.npy").string(), s.y = (dir / "y.npy").string();
    }
    s.whole_limit_bytes = 0;
    return data::open_npy_dataset(s);
  };
  const auto npy = row_by_row(false);
  const auto npz = row_by_row(true);
  const auto whole = open({{"type", "npy"}, {"x", "x.npy"}, {"y", "y.npy"}}, dir);
  std::vector<float> x(4), y(1);
  const std::int64_t last = 999;
  npy->read(std::span(&last, 1), x.data(), y.data());
  EXPECT_EQ(x, (std::vector<float>{3996, 3997, 3998, 3999}));
  auto changed = [](const std::string& e, const std::string& file) {
    return e.find("'" + file + "' changed while Tandem was reading it") != std::string::npos;
  };
  // Shorter: the rows past the new end are gone.
  numpy(dir, "np.save('x.npy', np.zeros((10, 4), np.float32))\n");
  std::string e = data_error_of([&] { npy->read(std::span(&last, 1), x.data(), y.data()); });
  EXPECT_TRUE(changed(e, (dir / "x.npy").string())) << e;
  whole->read(std::span(&last, 1), x.data(), y.data());  // read when it opened: as it was
  EXPECT_EQ(x, (std::vector<float>{3996, 3997, 3998, 3999}));
  npz->read(std::span(&last, 1), x.data(), y.data());  // untouched, still read
  numpy(dir, "np.savez('stored.npz', x=np.ones((10, 4), np.float32), y=np.arange(10))\n");
  e = data_error_of([&] { npz->read(std::span(&last, 1), x.data(), y.data()); });
  EXPECT_TRUE(changed(e, (dir / "stored.npz").string())) << e;
  // The same size, other values: the modification time tells.
  numpy(dir, "np.save('x.npy', np.zeros((1000, 4), np.float32))\n");
  const auto same = row_by_row(false);
  const std::int64_t first = 0;
  same->read(std::span(&first, 1), x.data(), y.data());
  numpy(dir, "np.save('y.npy', np.arange(1000) + 1)\n");
  fs::last_write_time(dir / "y.npy", fs::last_write_time(dir / "y.npy") + std::chrono::seconds(5));
  e = data_error_of([&] { same->read(std::span(&first, 1), x.data(), y.data()); });
  EXPECT_TRUE(changed(e, (dir / "y.npy").string())) << e;
}

TEST(NpyDataset, SpecsAreCheckedBeforeAnyFileIsTouched) {
  const fs::path dir = test::scratch_dir("npy-spec");
  auto config_error_of = [&](const json& spec) {
    try {
      open(spec, dir);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no ConfigError)");
  };
  EXPECT_NE(config_error_of({{"type", "npz"}, {"x", "x"}}).find("path"), std::string::npos);
  // x alone is data to predict (no targets); an empty name is still an error.
  EXPECT_NE(config_error_of({{"type", "npy"}, {"x", "a.npy"}, {"y", ""}}).find("data.train.y"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"type", "npy"}, {"x", ""}, {"y", "b"}}).find("expected a name"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"type", "npz"}, {"path", "a.npz"}, {"colour", 1}}).find("colour"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"type", "npz"}, {"path", "a.npz"}, {"scale", -1}}).find("scale"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"type", "npy"}, {"x", 5}, {"y", "b"}}).find("data.train.x"),
            std::string::npos);
}

TEST(NpyFormat, HeaderParserFollowsNumPysFormatModule) {
  // Version 2.0 header, written by NumPy for long headers; the dict as format.py writes it.
  std::string dict = "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }";
  dict.resize(118 - 12 - 1, ' ');  // with the newline: 106 bytes
  dict += '\n';
  std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
  const std::uint32_t len = static_cast<std::uint32_t>(dict.size());
  bytes.append(reinterpret_cast<const char*>(&len), 4);
  bytes += dict;
  const data::NpyHeader h = data::parse_npy_header(bytes, "v2");
  EXPECT_EQ(h.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(h.type.kind, data::NpyType::Kind::signed_int);
  EXPECT_EQ(h.type.bytes, 2);
  EXPECT_EQ(h.data_offset, 118u);
  EXPECT_EQ(h.data_bytes, 12u);
  // Version 9 and a header longer than the bytes given are refused.
  bytes[6] = 9;
  EXPECT_NE(data_error_of([&] { data::parse_npy_header(bytes, "v9"); }).find("version 9"),
            std::string::npos);
  bytes[6] = 2;
  EXPECT_NE(
      data_error_of([&] { data::parse_npy_header(bytes.substr(0, 40), "cut"); }).find("truncated"),
      std::string::npos);
  // Half floats: 1.0, -2.0, 65504 (the largest), a subnormal, infinity.
  const std::uint16_t halves[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00};
  float out[5];
  data::npy_to_float({data::NpyType::Kind::floating, 2, false},
                     reinterpret_cast<const std::uint8_t*>(halves), 5, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 65504.0f);
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(out[4]));
}

}  // namespace
}  // namespace tandem
