// libFuzzer target for EinsumDense's equation (nn/einsum_equation.cpp: Keras' three forms, the
// letters' roles, the output and bias shapes) with the shapes around it: a per-sample input shape,
// Keras' output_shape (null or a size per axis) and bias_axes from the input's first bytes, the
// equation from the rest. Each model that builds runs a forward and a backward on a batch of 2.
// Every bad equation or shape must end as a tandem::Error (a ConfigError naming the place) — any
// other exception, a crash, a hang or a sanitizer report is a finding.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/error.hpp"
#include "tandem/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  nlohmann::json batch_shape = nlohmann::json::array({nullptr});
  tandem::Shape sample;
  const int rank = input.ConsumeIntegralInRange(1, 4);
  for (int i = 0; i < rank; ++i) {
    sample.push_back(input.ConsumeIntegralInRange(1, 6));
    batch_shape.push_back(sample.back());
  }
  nlohmann::json output_shape = nlohmann::json::array();
  const int outputs = input.ConsumeIntegralInRange(0, 5);
  for (int i = 0; i < outputs; ++i) {
    const int d = input.ConsumeIntegralInRange(-1, 8);
    output_shape.push_back(d < 0 ? nlohmann::json(nullptr) : nlohmann::json(d));
  }
  nlohmann::json bias_axes = nullptr;
  if (input.ConsumeBool()) bias_axes = input.ConsumeRandomLengthString(6);
  const std::string equation = input.ConsumeRemainingBytesAsString();
  const nlohmann::json model = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "fuzz"},
        {"layers",
         {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", batch_shape}}}},
          {{"class_name", "EinsumDense"},
           {"config",
            {{"equation", equation},
             {"output_shape", output_shape},
             {"bias_axes", bias_axes},
             {"activation", "tanh"}}}}}}}}};
  try {
    auto m = tandem::Model::from_config(model, "model", 0);
    tandem::Shape x_shape{2};
    x_shape.insert(x_shape.end(), sample.begin(), sample.end());
    tandem::Tensor x(x_shape);
    for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    const tandem::Tensor& y = m->forward(x, true);
    tandem::Tensor dy(y.shape());
    for (std::int64_t i = 0; i < dy.size(); ++i) dy[i] = 1.0f;
    m->backward(dy);
  } catch (const tandem::Error&) {
  }
  return 0;
}
