#include "nn/attention_call.hpp"

#include "tandem/error.hpp"

namespace tandem::nn {

bool read_causal_option(const nlohmann::json& options, const std::string& path,
                        const std::string& label, bool fallback) {
  bool causal = fallback;
  for (const auto& [key, v] : options.items()) {
    if (key == "use_causal_mask" && v.is_boolean()) {
      causal = v.get<bool>();
    } else if ((key == "return_attention_scores" || key == "training") && v.is_boolean() &&
               !v.get<bool>()) {
      // the defaults: no scores returned; `training` false is what inference does anyway
    } else {
      throw ConfigError(path, label + ": the call argument " + key + "=" + v.dump() +
                                  " is not supported (use_causal_mask true/false is)");
    }
  }
  return causal;
}

std::unique_ptr<Dropout> attention_dropout(const std::string& layer, double rate,
                                           std::optional<std::uint64_t> seed) {
  if (!(rate > 0)) return nullptr;
  DropoutOptions dropout;
  dropout.rate = rate;
  dropout.seed = seed;
  return std::make_unique<Dropout>(layer + "/dropout", dropout);
}

void keys_for_every_query(backend::Backend& ops, const Tensor* query_rows, const Tensor& keys,
                          std::int64_t batch, std::int64_t tq, std::int64_t tv, Tensor& ones,
                          Tensor& out) {
  if (!query_rows) {
    ops.fill(ops.place(ones, {batch, tq}), 1.0f);
    query_rows = &ones;
  }
  ops.gemm({false, false, tq, tv, 1, backend::GemmEpilogue::none, batch}, *query_rows, keys,
           nullptr, ops.place(out, {batch, tq, tv}));
}

}  // namespace tandem::nn
