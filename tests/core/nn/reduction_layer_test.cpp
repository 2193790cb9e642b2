// The reduction layer (reduce_sum / mean / max / min over adjacent axes): values against NumPy,
// gradients against central differences, the shapes with and without keepdims, the refusals.
#include "nn/reduction_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"
#include "tandem/error.hpp"
#include "test_support.hpp"

namespace tandem::nn {
namespace TANDEM_TEST_FILE {

using nlohmann::json;
using Kind = Reduction::Kind;

struct ReductionCase {
  Kind kind;
  std::vector<std::int64_t> axes;
  bool keepdims;
};

const char* numpy_name(Kind kind) {
  return kind == Kind::sum    ? "sum"
         : kind == Kind::mean ? "mean"
         : kind == Kind::max  ? "max"
                              : "min";
}

std::vector<ReductionCase> cases() {
  return {{Kind::sum, {-1}, false},  {Kind::mean, {1}, true},          {Kind::max, {2}, false},
          {Kind::min, {2, 3}, true}, {Kind::sum, {1, 2}, false},       {Kind::max, {-3, -2}, true},
          {Kind::min, {3}, false},   {Kind::mean, {1, 2, 3, 4}, false}};
}

TEST(Reduction, AgreesWithNumPy) {
  const Tensor x = test::random_tensor({2, 3, 4, 2, 5}, 11, -2, 2);
  const auto dir = test::scratch_dir("reduction-numpy");
  const std::vector<ReductionCase> all = cases();
  json spec = json::array();
  for (const ReductionCase& c : all)
    spec.push_back({{"op", numpy_name(c.kind)}, {"axes", c.axes}, {"keepdims", c.keepdims}});
  test::write_text(
      dir / "cases.json",
      json{{"x", std::vector<float>(x.data(), x.data() + x.size())}, {"cases", spec}}.dump());
  const auto r = test::run_python(
      dir / "reduce.py",
      "import json, sys, numpy as np\n"
      "d = json.load(open(sys.argv[1]))\n"
      "x = np.array(d['x'], dtype=np.float64).reshape(2, 3, 4, 2, 5)\n"
      "out = []\n"
      "for c in d['cases']:\n"
      "  y = getattr(np, c['op'])(x, axis=tuple(c['axes']), keepdims=c['keepdims'])\n"
      "  out.append({'shape': list(y.shape), 'values': y.ravel().tolist()})\n"
      "print(json.dumps(out))\n",
      (dir / "cases.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json want = json::parse(r.out);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const ReductionCase& c = all[i];
    Reduction layer("r", c.kind, c.axes, c.keepdims);
    SCOPED_TRACE(layer.config().dump());
    Rng init(0);
    Shape out = layer.build({3, 4, 2, 5}, init);
    out.insert(out.begin(), 2);
    Shape numpy_shape = want[i]["shape"].get<Shape>();
    if (numpy_shape.size() == 1) numpy_shape.push_back(1);  // a number per sample: (batch, 1)
    EXPECT_EQ(out, numpy_shape);
    test::expect_close(test::to_double(layer.forward(x, true)),
                       want[i]["values"].get<std::vector<double>>(), 1e-6, 1e-6, "values");
  }
}

TEST(Reduction, GradientsMatchCentralDifferences) {
  for (const ReductionCase& c : cases()) {
    Reduction layer("r", c.kind, c.axes, c.keepdims);
    SCOPED_TRACE(layer.config().dump());
    Rng init(0);
    Shape out = layer.build({3, 4, 2, 5}, init);
    out.insert(out.begin(), 2);
    // 240 values 1/60 apart in a scrambled order: every maximum and minimum is one value, and a
    // difference step of 1e-3 never changes which.
    Tensor x(Shape{2, 3, 4, 2, 5});
    for (std::int64_t i = 0; i < 240; ++i) x[i] = float((i * 37) % 240) / 60.0f - 2.0f;
    const Tensor dy = test::random_tensor(out, 13);
    layer.forward(x, true);
    const Tensor dx = layer.backward(dy, true).clone();
    const auto loss = [&](const std::vector<double>& v) {
      Tensor t(x.shape());
      for (std::size_t i = 0; i < v.size(); ++i) t[static_cast<std::int64_t>(i)] = float(v[i]);
      const Tensor& y = layer.forward(t, true);
      double total = 0;
      for (std::int64_t i = 0; i < y.size(); ++i) total += double(y[i]) * dy[i];
      return total;
    };
    test::expect_close(test::to_double(dx), test::numeric_gradient(loss, test::to_double(x), 1e-3),
                       2e-3, 2e-3, "gradient");
  }
}

std::string build_error(Reduction layer) {
  return test::error_of<ShapeError>([&] {
    Rng init(0);
    layer.build({3, 4, 5}, init);
  });
}

TEST(Reduction, RefusesAxesItCannotReduceNamingTheLayer) {
  EXPECT_EQ(build_error(Reduction("r", Kind::sum, {1, 3}, false)),
            "layer 'r' (sum over axes [1, 3]) on inputs (None, 3, 4, 5): the axes are not "
            "adjacent (Tandem reduces over one block of adjacent axes)");
  EXPECT_NE(build_error(Reduction("r", Kind::max, {0}, false)).find("the batch axis"),
            std::string::npos);
  EXPECT_NE(build_error(Reduction("r", Kind::max, {-4}, false)).find("the batch axis"),
            std::string::npos);
  EXPECT_NE(build_error(Reduction("r", Kind::min, {4}, false))
                .find("axis 4 is out of range for 4 axes (the batch counted)"),
            std::string::npos);
  EXPECT_NE(build_error(Reduction("r", Kind::mean, {2, -2}, false)).find("names axis 2 twice"),
            std::string::npos);
  const auto error = [](const json& config) {
    return test::layer_config_error("TandemReduction", config);
  };
  EXPECT_EQ(error({{"reduction", "sum"}, {"axes", {-1}}}), "(no error)");
  EXPECT_NE(error({{"reduction", "prod"}, {"axes", {-1}}}).find("reduction': expected one of"),
            std::string::npos);
  EXPECT_NE(error({{"reduction", "sum"}, {"axes", -1}}).find("axes': expected a list of axes"),
            std::string::npos);
  EXPECT_NE(error({{"reduction", "sum"}, {"axes", {1.5}}}).find("axes[0]': expected an axis"),
            std::string::npos);
  EXPECT_NE(error({{"reduction", "sum"}, {"axes", {1}}, {"keepdims", "yes"}}).find("keepdims"),
            std::string::npos);
  EXPECT_NE(error({{"axes", {1}}}).find("reduction"), std::string::npos);
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem::nn
