// The csv dataset type against tables Python's csv module writes (quoting, "" escapes, CRLF):
// columns by name, declared categories, and each kind of bad table or spec ending as an error
// that names the file, row and column (or the JSON path).
#include <gtest/gtest.h>

#include "core/data/data_test_util.hpp"
#include "data/datasets.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;
using nlohmann::json;
using test::data_error_of;

std::shared_ptr<Dataset> open(const json& spec, const fs::path& dir) {
  return make_dataset(spec, "data.train", dir.string());
}

// All samples: x rows then y rows.
std::pair<std::vector<float>, std::vector<float>> read_all(const Dataset& d) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(d.size()));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  std::vector<float> x(all.size() * shape_size(d.x_shape()));
  std::vector<float> y(all.size() * shape_size(d.y_shape()));
  d.read(all, x.data(), y.data());
  return {x, y};
}

void python_csv(const fs::path& dir, const std::string& name, const std::string& rows,
                const std::string& options = "") {
  test::write_text(dir / "make.py", "import csv\nwith open('" + name +
                                        "', 'w', newline='') as f:\n"
                                        "    w = csv.writer(f" +
                                        options +
                                        ")\n"
                                        "    w.writerows(" +
                                        rows + ")\n");
  const auto r =
      test::run_command("cd " + dir.string() + " && " + test::system_python() + " make.py");
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(CsvDataset, ColumnsByNameDeclaredCategoriesAndPythonsQuoting) {
  const fs::path dir = test::scratch_dir("csv-read");
  // Python quotes "big, heavy" and doubles the quote in 'say "hi"'; rows end in CRLF.
  python_csv(dir, "animals.csv",
             "[['weight', 'size', 'note', 'animal'], [4.5, 'big, heavy', 'say \"hi\"', 'dog'],"
             " [0.25, 'small', 'x', 'cat'], [-1e3, 'small', '', 'dog']]");
  const json spec = {
      {"type", "csv"},
      {"path", "animals.csv"},
      {"y", "animal"},
      {"x", {"size", "weight"}},
      {"categories", {{"animal", {"cat", "dog"}}, {"size", {"small", "big, heavy"}}}}};
  const auto d = open(spec, dir);
  EXPECT_EQ(d->size(), 3);
  EXPECT_EQ(d->x_shape(), (Shape{2}));
  EXPECT_EQ(d->y_shape(), Shape{});  // one target column: a class index per sample
  const auto [x, y] = read_all(*d);
  EXPECT_EQ(x, (std::vector<float>{1, 4.5f, 0, 0.25f, 0, -1000}));
  EXPECT_EQ(y, (std::vector<float>{1, 0, 1}));
  EXPECT_NE(d->describe().find("3 samples, 2 features"), std::string::npos);

  // Semicolons; x defaults to every column but y, in file order; two target columns.
  python_csv(dir, "semi.csv", "[['a', 'b', 't1', 't2'], [1, 2, 3, 4], [5, 6, 7, 8]]",
             ", delimiter=';'");
  const auto s =
      open({{"type", "csv"}, {"path", "semi.csv"}, {"y", {"t2", "t1"}}, {"delimiter", ";"}}, dir);
  EXPECT_EQ(s->x_shape(), (Shape{2}));
  EXPECT_EQ(s->y_shape(), (Shape{2}));
  const auto [sx, sy] = read_all(*s);
  EXPECT_EQ(sx, (std::vector<float>{1, 2, 5, 6}));
  EXPECT_EQ(sy, (std::vector<float>{4, 3, 8, 7}));

  // Excel's "CSV UTF-8" starts with a byte order mark, which is no part of the first name
  // (Python's utf-8-sig, pandas). It was: "no column 'a' (it has '\ufeffa', ...)".
  test::write_text(dir / "bom.csv",
                   "\xEF\xBB\xBF"
                   "a,b,t1,t2\n1,2,3,4\n5,6,7,8\n");
  const auto bom =
      open({{"type", "csv"}, {"path", "bom.csv"}, {"y", {"t2", "t1"}}, {"x", {"a", "b"}}}, dir);
  EXPECT_EQ(read_all(*bom), read_all(*s));
}

TEST(CsvDataset, EachKindOfBadTableIsADataErrorNamingTheRowAndColumn) {
  const fs::path dir = test::scratch_dir("csv-bad");
  test::write_text(dir / "colours.csv", "x,colour\n1,red\n2,blue\n3,green\n");
  test::write_text(dir / "empty-cell.csv", "x,y\n1,2\n,3\n");
  test::write_text(dir / "ragged.csv", "x,y\n1,2\n3\n");
  test::write_text(dir / "twice.csv", "x,x,y\n1,2,3\n");
  test::write_text(dir / "quote.csv", "x,y\n1,\"2\n");
  test::write_text(dir / "empty.csv", "");
  test::write_text(dir / "header-only.csv", "x,y\n");
  test::write_text(dir / "inf.csv", "x,y\n1,inf\n");
  test::write_text(dir / "huge.csv", "x,y\n1,2\n-1e400,3\n");  // beyond a double
  test::write_text(dir / "tiny.csv",
                   "x,y\n1e-400,2\n-0." + std::string(400, '0') + "1,3\n");  // both 0
  test::write_text(dir / "wide.csv", "x,y\n1e39,2\n");  // a double, beyond a float
  test::write_text(dir / "long.csv", "x,y\n1,2\n" + std::string(100000, 'z') + ",3\n");
  test::write_text(dir / "only-y.csv", "y\n1\n");
  auto error_of = [&](const std::string& file, const json& extra = json::object()) {
    json spec = {{"type", "csv"}, {"path", file}, {"y", "y"}};
    spec.update(extra);
    return data_error_of([&] { open(spec, dir); });
  };
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  // A column of strings without declared categories: the error gives the declaration to paste.
  std::string e = error_of("colours.csv", {{"y", "x"}});
  EXPECT_TRUE(has(e, "colours.csv': row 2, column 'colour': \"red\" is not a number") &&
              has(e, R"("categories": {"colour": ["blue", "green", "red"]})"))
      << e;
  e = error_of("colours.csv", {{"y", "x"}, {"categories", {{"colour", {"red", "blue"}}}}});
  EXPECT_TRUE(has(e, "row 4, column 'colour': \"green\" is not one of the column's categories"))
      << e;
  EXPECT_TRUE(has(error_of("empty-cell.csv"), "row 3, column 'x': empty"))
      << error_of("empty-cell.csv");
  EXPECT_TRUE(has(error_of("ragged.csv"), "row 3 has 1 fields, the header has 2"))
      << error_of("ragged.csv");
  EXPECT_TRUE(has(error_of("twice.csv"), "the column 'x' appears twice"));
  EXPECT_TRUE(has(error_of("quote.csv"),
                  "quote.csv': row 2, column 'y': a quote is opened and "
                  "never closed"))
      << error_of("quote.csv");
  EXPECT_TRUE(has(error_of("empty.csv"), "empty (a CSV needs a header row)"));
  EXPECT_TRUE(has(error_of("header-only.csv"), "no rows under the header"));
  // Beyond a double reads as Python's float() reads it (it was "not a number; declare its
  // categories"): infinite, then refused as 1e39 is; 0 for what is too small.
  e = error_of("huge.csv");
  EXPECT_TRUE(has(e, "row 3, column 'x': \"-1e400\" is beyond float32's range")) << e;
  e = error_of("wide.csv");
  EXPECT_TRUE(has(e, "row 2, column 'x': \"1e39\" is beyond float32's range")) << e;
  // A long cell is quoted cut (the whole 5 MB cell was the message).
  e = error_of("long.csv");
  EXPECT_TRUE(has(e, "row 3, column 'x': \"" + std::string(60, 'z') + "\"... (100000 characters)"))
      << e.substr(0, 300);
  EXPECT_LT(e.size(), 1000u);
  const auto [tiny_x, tiny_y] =
      read_all(*open({{"type", "csv"}, {"path", "tiny.csv"}, {"y", "y"}}, dir));
  EXPECT_EQ(tiny_x, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_TRUE(has(error_of("inf.csv"), "row 2, column 'y': \"inf\" is not a finite number"))
      << error_of("inf.csv");
  EXPECT_TRUE(has(error_of("only-y.csv"), "no feature columns"));
  e = error_of("colours.csv", {{"y", "label"}});
  EXPECT_TRUE(has(e, "no column 'label' (it has 'x', 'colour')")) << e;
  EXPECT_TRUE(has(error_of("none.csv"), "none.csv"));
  EXPECT_TRUE(has(error_of("."), "folder"));
}

TEST(CsvDataset, BadSpecsAreConfigErrorsAtTheirPath) {
  const fs::path dir = test::scratch_dir("csv-spec");
  auto config_error_of = [&](const json& extra) {
    json spec = {{"type", "csv"}, {"path", "t.csv"}, {"y", "y"}};
    spec.update(extra);
    try {
      open(spec, dir);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no ConfigError)");
  };
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(config_error_of({{"delimiter", ";;"}}), "data.train.delimiter"));
  EXPECT_TRUE(has(config_error_of({{"delimiter", "\""}}), "data.train.delimiter"));
  EXPECT_TRUE(has(config_error_of({{"categories", 3}}), "data.train.categories"));
  EXPECT_TRUE(
      has(config_error_of({{"categories", {{"c", json::array()}}}}), "data.train.categories.c"));
  EXPECT_TRUE(has(config_error_of({{"categories", {{"c", {"a", "a"}}}}}), "lists a value twice"));
  EXPECT_TRUE(
      has(config_error_of({{"categories", {{"c", {"a", 1}}}}}), "data.train.categories.c[1]"));
  EXPECT_TRUE(has(config_error_of({{"y", json::array()}}), "data.train.y"));
  EXPECT_TRUE(has(config_error_of({{"x", {"a", 1}}}), "data.train.x[1]"));
  EXPECT_TRUE(has(config_error_of({{"y", ""}}), "expected a column name"));
  EXPECT_TRUE(has(config_error_of({{"sheet", 1}}), "sheet"));
}

}  // namespace
}  // namespace tandem
