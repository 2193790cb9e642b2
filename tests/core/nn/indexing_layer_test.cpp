// The indexing layer (x[...], expand_dims, squeeze): values by hand on a tensor whose values are
// their own positions, NumPy's basic indexing on many indices, the gradient (the scatter back, and
// <dy, y> = <dx, x> for every index), the reshapes that copy nothing, and the refusals.
#include "nn/indexing_layer.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "backend/ops.hpp"
#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using Kind = IndexItem::Kind;

IndexItem slice(std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                std::optional<std::int64_t> step = std::nullopt) {
  IndexItem item = IndexItem::all();
  item.start = start;
  item.stop = stop;
  item.step = step;
  return item;
}

// A batch whose every value is its own flat position.
Tensor positions(const Shape& shape) {
  Tensor x(shape);
  std::iota(x.data(), x.data() + x.size(), 0.0f);
  return x;
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

// `layer` built for samples `sample` and run forward on a batch of 2 of positions().
Tensor forward(Layer& layer, const Shape& sample, Shape* out = nullptr) {
  Rng init(0);
  const Shape o = layer.build(sample, init);
  if (out) *out = o;
  Shape batch{2};
  batch.insert(batch.end(), sample.begin(), sample.end());
  return layer.forward(positions(batch), true);
}

TEST(Indexing, PicksWhatNumPyPicksByHand) {
  // x (2, 3, 4): x[n, r, c] = 12n + 4r + c.
  Shape out;
  auto first = Indexing::indexing("first", {IndexItem::all(), IndexItem::at(1)});
  EXPECT_EQ(values(forward(*first, {3, 4}, &out)),
            (std::vector<float>{4, 5, 6, 7, 16, 17, 18, 19}));
  EXPECT_EQ(out, (Shape{4}));
  // x[:, ::-2, 1:3]: rows 2 and 0, columns 1 and 2.
  auto strided = Indexing::indexing("s", {IndexItem::all(), slice({}, {}, -2), slice(1, 3)});
  EXPECT_EQ(values(forward(*strided, {3, 4}, &out)),
            (std::vector<float>{9, 10, 1, 2, 21, 22, 13, 14}));
  EXPECT_EQ(out, (Shape{2, 2}));
  // x[..., -1]
  auto last = Indexing::indexing("l", {IndexItem::rest(), IndexItem::at(-1)});
  EXPECT_EQ(values(forward(*last, {3, 4}, &out)), (std::vector<float>{3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(out, (Shape{3}));
  // x[:, None, 2]: a new axis, then row 2.
  auto added = Indexing::indexing("a", {IndexItem::all(), IndexItem::new_axis(), IndexItem::at(2)});
  EXPECT_EQ(values(forward(*added, {3, 4}, &out)),
            (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(out, (Shape{1, 4}));
  // Python's clamping: x[:, 5:1:-1] is row 2; x[:, -10:2, 3] rows 0 and 1 of column 3.
  auto clamped = Indexing::indexing("c", {IndexItem::all(), slice(5, 1, -1), IndexItem::at(0)});
  EXPECT_EQ(values(forward(*clamped, {3, 4}, &out)), (std::vector<float>{8, 20}));
  EXPECT_EQ(out, (Shape{1}));
  auto low = Indexing::indexing("low", {IndexItem::all(), slice(-10, 2), IndexItem::at(3)});
  EXPECT_EQ(values(forward(*low, {3, 4}, &out)), (std::vector<float>{3, 7, 15, 19}));
  EXPECT_EQ(index_to_string({IndexItem::all(), slice(-10, 2), IndexItem::at(3)}), "x[:, -10:2, 3]");
  EXPECT_EQ(index_to_string({IndexItem::rest(), IndexItem::new_axis(), slice({}, {}, -2)}),
            "x[..., None, ::-2]");
}

TEST(Indexing, ExpandAndSqueezeAreReshapesThatCopyNothing) {
  Rng init(0);
  auto expand = Indexing::expanding("e", {-1});
  EXPECT_EQ(expand->build({3, 4}, init), (Shape{3, 4, 1}));
  Tensor x = positions({2, 3, 4});
  EXPECT_EQ(expand->forward(x, true).data(), x.data());
  Tensor g = test::random_tensor({2, 3, 4, 1}, 3);
  EXPECT_EQ(expand->backward(g, true).data(), g.data());
  EXPECT_EQ(expand->backward(g, true).shape(), (Shape{2, 3, 4}));
  auto middle = Indexing::expanding("m", {1, 3});
  EXPECT_EQ(middle->build({3, 4}, init), (Shape{1, 3, 1, 4}));  // as np.expand_dims
  auto negative = Indexing::expanding("n", {-2});
  EXPECT_EQ(negative->build({3, 4}, init), (Shape{3, 1, 4}));
  auto squeeze = Indexing::squeezing("s", std::vector<std::int64_t>{-1});
  EXPECT_EQ(squeeze->build({3, 1}, init), (Shape{3}));
  auto every = Indexing::squeezing("all", std::nullopt);
  EXPECT_EQ(every->build({1, 3, 1}, init), (Shape{3}));
  Tensor y = positions({1, 1, 3, 1});  // a batch of one: the batch axis stays
  EXPECT_EQ(every->forward(y, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(every->forward(y, true).data(), y.data());
  // x[:, :] keeps everything in order: a view too.
  auto whole = Indexing::indexing("w", {IndexItem::all(), IndexItem::all()});
  whole->build({3, 4}, init);
  EXPECT_EQ(whole->forward(x, true).data(), x.data());
  EXPECT_EQ(
      every->config(),
      (json{
          {"name", "all"}, {"trainable", true}, {"dtype", "float32"}, {"squeeze_axes", nullptr}}));
  EXPECT_EQ(middle->config()["expand_axes"], json({1, 3}));
}

TEST(Indexing, TheGradientIsTheScatterBackIntoZeros) {
  auto strided = Indexing::indexing("s", {IndexItem::all(), slice({}, {}, -2), slice(1, 3)});
  forward(*strided, {3, 4});
  Tensor dy(Shape{2, 2, 2});
  std::iota(dy.data(), dy.data() + dy.size(), 1.0f);
  const std::vector<float> dx = values(strided->backward(dy, true));
  std::vector<float> want(24, 0.0f);
  // dy[n, i, j] goes to row (2, 0)[i], column 1 + j.
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        want[12 * n + 4 * (i == 0 ? 2 : 0) + 1 + j] = dy.data()[4 * n + 2 * i + j];
  EXPECT_EQ(dx, want);
  EXPECT_TRUE(strided->backward(dy, false).empty());
  // An empty batch (a replica's empty shard) passes both ways.
  EXPECT_EQ(strided->forward(Tensor({0, 3, 4}), true).shape(), (Shape{0, 2, 2}));
  EXPECT_EQ(strided->backward(Tensor({0, 2, 2}), true).shape(), (Shape{0, 3, 4}));
}

// Indices over samples (5, 4, 3), each as C++ items and as the Python NumPy reads.
std::vector<std::vector<IndexItem>> numpy_cases() {
  const IndexItem all = IndexItem::all(), rest = IndexItem::rest(), none = IndexItem::new_axis();
  return {{all, IndexItem::at(0)},
          {all, IndexItem::at(-1), IndexItem::at(2)},
          {all, slice(1, 4, 2), rest, slice({}, {}, -1)},
          {rest, IndexItem::at(1)},
          {rest, none},
          {all, none, slice(-2, {}), none, IndexItem::at(1)},
          {all, slice(4, 0, -3), slice(-1, -5, -1)},
          {all, slice(-100, 100), slice(2, 3), slice(1, {}, 5)},
          {all, IndexItem::at(3), rest, none},
          {all, slice({}, {}, 2), IndexItem::at(-4), slice({}, -1)},
          {rest},
          {all, slice(3, {}, -1), IndexItem::at(0), IndexItem::at(2)},
          // Steps beyond every length (one position each; the view's stride must not overflow).
          {all, slice({}, {}, std::int64_t{1} << 62), slice({}, {}, -(std::int64_t{1} << 62))}};
}

TEST(Indexing, AgreesWithNumPysBasicIndexing) {
  const auto cases = numpy_cases();
  const auto dir = test::scratch_dir("indexing-numpy");
  std::string indices;
  for (const auto& items : cases) indices += index_to_string(items) + "\n";
  test::write_text(dir / "indices.txt", indices);
  const auto r =
      test::run_python(dir / "numpy_index.py",
                       "import json, sys, numpy as np\n"
                       "x = np.arange(2 * 5 * 4 * 3, dtype=np.float64).reshape(2, 5, 4, 3)\n"
                       "out = []\n"
                       "for line in open(sys.argv[1]).read().splitlines():\n"
                       "  y = eval(line)\n"
                       "  out.append({'shape': list(y.shape), 'values': y.ravel().tolist()})\n"
                       "print(json.dumps(out))\n",
                       (dir / "indices.txt").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json want = json::parse(r.out);
  ASSERT_EQ(want.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(index_to_string(cases[i]));
    auto layer = Indexing::indexing("i", cases[i]);
    Shape out;
    const Tensor y = forward(*layer, {5, 4, 3}, &out);
    out.insert(out.begin(), 2);
    EXPECT_EQ(out, want[i]["shape"].get<Shape>());
    EXPECT_EQ(values(y), want[i]["values"].get<std::vector<float>>());
  }
}

TEST(Indexing, TheGradientIsTheForwardsAdjointForEveryIndex) {
  // <dy, y(x)> = <dx(dy), x> for a linear map and its gradient, whatever the index.
  for (const auto& items : numpy_cases()) {
    SCOPED_TRACE(index_to_string(items));
    auto layer = Indexing::indexing("i", items);
    Rng init(0);
    Shape out = layer->build({5, 4, 3}, init);
    out.insert(out.begin(), 3);
    const Tensor x = test::random_tensor({3, 5, 4, 3}, 7);
    const Tensor y = layer->forward(x, true);
    const Tensor dy = test::random_tensor(out, 8);
    const Tensor dx = layer->backward(dy, true);
    double forward_side = 0, backward_side = 0;
    for (std::int64_t k = 0; k < y.size(); ++k) forward_side += double(y.data()[k]) * dy.data()[k];
    for (std::int64_t k = 0; k < x.size(); ++k) backward_side += double(dx.data()[k]) * x.data()[k];
    EXPECT_NEAR(forward_side, backward_side, 1e-9 * (1 + std::abs(forward_side)));
    EXPECT_EQ(dx.shape(), x.shape());
  }
}

TEST(Indexing, TheBackendRefusesAViewOutsideItsTensors) {
  backend::Backend& ops = backend::cpu_backend();
  backend::StridedView v;
  v.rank = 2;
  v.dims[0] = 2, v.dims[1] = 3;
  v.strides[0] = 4, v.strides[1] = -1;
  v.offset = 2;  // positions 0 to 6: the second row's last is 2 + 4 - 0 = 6, its first 4
  Tensor x(Shape{7}), y(Shape{6});
  ops.gather_view(v, x, y);
  v.offset = 1;  // reaches -1
  EXPECT_EQ(test::error_of<std::logic_error>([&] { ops.gather_view(v, x, y); }),
            "backend operation gather_view: the view picks positions -1 to 5 of a tensor of 7 "
            "values");
  v.offset = 2;
  Tensor small(Shape{5});
  EXPECT_NE(test::error_of<std::logic_error>([&] {
              ops.gather_view(v, x, small);
            }).find("the view holds 6 values, its tensor 5"),
            std::string::npos);
  EXPECT_NE(test::error_of<std::logic_error>([&] { ops.scatter_view(v, y, small); })
                .find("backend operation scatter_view: the view picks positions 0 to 6 of a "
                      "tensor of 5 values"),
            std::string::npos);
  v.dims[1] = 0;
  EXPECT_NE(test::error_of<std::logic_error>([&] {
              ops.gather_view(v, x, y);
            }).find("axis 1 of the view has no values"),
            std::string::npos);
}

std::string build_error(Indexing& layer, const Shape& sample) {
  return test::error_of<ShapeError>([&] {
    Rng init(0);
    layer.build(sample, init);
  });
}

TEST(Indexing, RefusesWhatNumPyOrTheBatchForbidsNamingTheLayer) {
  const IndexItem all = IndexItem::all();
  EXPECT_EQ(build_error(*Indexing::indexing("pick", {all, IndexItem::at(3)}), {3, 4}),
            "layer 'pick' (x[:, 3]) on inputs (None, 3, 4): index 3 is out of range for axis 1 "
            "of length 3");
  EXPECT_NE(build_error(*Indexing::indexing("p", {IndexItem::at(0)}), {3})
                .find("indexes the batch axis (axis 0), which stays whole"),
            std::string::npos);
  EXPECT_NE(
      build_error(*Indexing::indexing("p", {slice(1, {})}), {3}).find("indexes the batch axis"),
      std::string::npos);
  EXPECT_NE(build_error(*Indexing::indexing("p", {IndexItem::new_axis()}), {3})
                .find("adds an axis before the batch axis"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::indexing("p", {IndexItem::rest(), all, IndexItem::rest()}), {3})
                .find("only have a single ellipsis"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::indexing("p", {all, all, all}), {3})
                .find("indexes 3 axes of inputs with 2 (the batch counted)"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::indexing("p", {all, slice(2, 1)}), {3})
                .find("takes no values of axis 1 (length 3)"),
            std::string::npos);
  EXPECT_EQ(build_error(*Indexing::squeezing("sq", std::vector<std::int64_t>{1}), {3, 1}),
            "layer 'sq' (squeeze(x, [1])) on inputs (None, 3, 1): axis 1 has length 3, not 1");
  EXPECT_NE(build_error(*Indexing::squeezing("sq", std::vector<std::int64_t>{0}), {3})
                .find("drops the batch axis, which stays"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::squeezing("sq", std::vector<std::int64_t>{2}), {3})
                .find("axis 2 is out of range for 2 axes (the batch counted)"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::expanding("e", {0}), {3})
                .find("(expand_dims(x, [0])) on inputs (None, 3): adds an axis before the batch"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::expanding("e", {-3}), {3}).find("adds an axis before"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::expanding("e", {1, -3}), {3}).find("names axis 1 twice"),
            std::string::npos);
  EXPECT_NE(build_error(*Indexing::indexing("p", {all}), {1, 1, 1, 1, 1, 1, 1, 1})
                .find("inputs of more than 7 axes per sample are not supported"),
            std::string::npos);
  // A batch of other samples than the layer was built for.
  auto built = Indexing::indexing("b", {all, IndexItem::at(0)});
  Rng init(0);
  built->build({3}, init);
  EXPECT_NE(test::error_of<ShapeError>([&] {
              built->forward(Tensor({2, 4}), true);
            }).find("layer 'b' (TandemIndexing) expects inputs (None, 3), got (2, 4)"),
            std::string::npos);
}

TEST(Indexing, ItsConfigIsReadBackAndGarbageIsRefusedAtItsPlace) {
  const json index = {1, nullptr, "...", {{"start", -2}, {"stop", nullptr}, {"step", 2}}};
  auto layer = test::make_layer("TandemIndexing", {{"name", "i"}, {"index", index}});
  EXPECT_EQ(layer->config()["index"], index);
  auto squeeze = test::make_layer("TandemIndexing", {{"name", "s"}, {"squeeze_axes", nullptr}});
  EXPECT_EQ(squeeze->config()["squeeze_axes"], nullptr);
  // A stop beyond any length (sys.maxsize) reads as "to the end".
  auto huge = test::make_layer(
      "TandemIndexing",
      {{"index", {nullptr, {{"start", 1}, {"stop", 9223372036854775807LL}, {"step", nullptr}}}}});
  const auto error = [](const json& config) {
    return test::layer_config_error("TandemIndexing", config);
  };
  EXPECT_NE(error({{"index", 3}}).find("expected a list of index items, got 3"), std::string::npos);
  EXPECT_NE(error({{"index", {1.5}}}).find("[0]': expected a position, an integer, got 1.5"),
            std::string::npos);
  EXPECT_NE(error({{"index", {"..", 1}}}).find("index[0]': expected an integer, null (a new axis)"),
            std::string::npos);
  EXPECT_NE(error({{"index", {{{"start", 1}, {"stop", 2}, {"bogus", 1}}}}})
                .find("index[0].bogus': unknown key of a slice"),
            std::string::npos);
  EXPECT_NE(error({{"index", {{{"start", "1"}}}}}).find("index[0].start': expected a slice bound"),
            std::string::npos);
  EXPECT_NE(error({{"index", {{{"step", 0}}}}}).find("index[0].step': a slice's step cannot be 0"),
            std::string::npos);
  EXPECT_NE(error({{"index", json::array()}, {"expand_axes", {1}}})
                .find("expected exactly one of \"index\", \"expand_axes\" and \"squeeze_axes\""),
            std::string::npos);
  EXPECT_NE(error(json::object()).find("expected exactly one of"), std::string::npos);
  EXPECT_NE(error({{"expand_axes", "a"}}).find("expand_axes': expected a list of axes"),
            std::string::npos);
  EXPECT_NE(error({{"squeeze_axes", {1, true}}}).find("squeeze_axes[1]': expected an axis"),
            std::string::npos);
  EXPECT_NE(error({{"index", json::array()}, {"units", 3}}).find("units"), std::string::npos);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem::nn
