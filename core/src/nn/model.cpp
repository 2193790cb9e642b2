#include "tandem/model.hpp"

#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "nn/layer_extensions.hpp"
#include "nn/layer_registry.hpp"
#include "tandem/checkpoint_file.hpp"
#include "util/config_object.hpp"
#include "tandem/error.hpp"

namespace tandem {

namespace {

using nlohmann::json;

std::string indexed(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// Accepts "float32", null, or a Keras 3 DTypePolicy object naming float32.
void check_dtype(ConfigObject& c) {
  const json* d = c.find("dtype");
  if (!d) return;
  std::string name;
  if (d->is_string())
    name = d->get<std::string>();
  else if (d->is_object() && d->contains("config") && (*d)["config"].contains("name") &&
           (*d)["config"]["name"].is_string())
    name = (*d)["config"]["name"].get<std::string>();
  if (name != "float32")
    throw ConfigError(c.path_of("dtype"), "only float32 is supported, got " + d->dump());
}

// A per-sample shape from input_shape (no batch) or batch_input_shape/batch_shape (with batch).
std::optional<Shape> read_input_shape(ConfigObject& c) {
  auto to_shape = [&](const std::string& key, bool has_batch) {
    auto dims = c.get_int_list(key, true);
    if (has_batch) {
      if (dims.empty()) throw ConfigError(c.path_of(key), "expected [batch, dims...]");
      dims.erase(dims.begin());
    }
    Shape s;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (!dims[i] || *dims[i] <= 0)
        throw ConfigError(indexed(c.path_of(key), i + (has_batch ? 1 : 0)),
                          "expected a positive dimension (only the batch axis may be null)");
      s.push_back(*dims[i]);
    }
    return s;
  };
  std::optional<Shape> shape;
  for (const char* key : {"batch_input_shape", "batch_shape"})
    if (c.has(key))
      shape = to_shape(key, true);
    else
      c.ignore({key});
  if (c.has("input_shape"))
    shape = to_shape("input_shape", false);
  else
    c.ignore({"input_shape"});
  if (c.has("shape"))
    shape = to_shape("shape", false);
  else
    c.ignore({"shape"});
  c.ignore({"batch_size"});
  return shape;
}

}  // namespace

std::unique_ptr<Model> Model::from_config(const json& config, const std::string& path,
                                          std::uint64_t seed) {
  ConfigObject top(config, path);
  const std::string cls = top.get_string("class_name");
  if (cls != "Sequential")
    throw ConfigError(top.path_of("class_name"),
                      "only \"Sequential\" models are supported, got \"" + cls + "\"");
  top.ignore({"module", "registered_name", "build_config", "compile_config"});
  ConfigObject cfg = top.get_object("config");
  top.finish();

  std::unique_ptr<Model> model(new Model());
  model->seed_ = seed;
  model->source_config_ = config;
  model->name_ = cfg.get_string("name", "sequential");
  cfg.ignore({"trainable", "build_input_shape"});
  check_dtype(cfg);
  const json& layers = cfg.at("layers");
  const std::string layers_path = cfg.path_of("layers");
  if (!layers.is_array()) throw ConfigError(layers_path, "expected a list of layers");
  cfg.finish();

  const auto& registry = nn::layer_registry();
  std::map<std::string, int> name_counts;
  std::set<std::string> used_names;
  std::optional<Shape> input_shape;
  Rng init(seed);

  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string lpath = indexed(layers_path, i);
    ConfigObject entry(layers[i], lpath);
    const std::string lcls = entry.get_string("class_name");
    entry.ignore({"module", "registered_name", "build_config", "inbound_nodes", "name"});
    json empty = json::object();
    const json* cfg_json = entry.find("config");
    ConfigObject lc(cfg_json ? *cfg_json : empty, entry.path_of("config"));
    entry.finish();

    if (lcls == "InputLayer") {
      if (i != 0 || input_shape)
        throw ConfigError(entry.path_of("class_name"), "an InputLayer must be the first layer");
      input_shape = read_input_shape(lc);
      if (!input_shape)
        throw ConfigError(lc.path(), "InputLayer needs batch_input_shape, batch_shape or shape");
      check_dtype(lc);
      lc.ignore({"name", "sparse", "ragged", "input_tensor", "optional"});
      lc.finish();
      model->input_layer_config_ = *cfg_json;
      continue;
    }
    auto it = registry.find(lcls);
    if (it == registry.end()) {
      std::string known;
      for (const auto& [k, _] : registry) known += (known.empty() ? "" : ", ") + k;
      throw ConfigError(entry.path_of("class_name"),
                        "unknown layer class '" + lcls + "' (known: InputLayer, " + known + ")");
    }
    std::string name;
    if (lc.has("name")) {
      name = lc.get_string("name");
    } else {
      int n = name_counts[it->second.default_name]++;
      name = it->second.default_name + (n == 0 ? "" : "_" + std::to_string(n));
    }
    if (name.empty() || name.find('/') != std::string::npos)
      throw ConfigError(lc.path_of("name"), "layer names must be non-empty and contain no '/'");
    if (!used_names.insert(name).second)
      throw ConfigError(lc.path_of("name"), "duplicate layer name '" + name + "'");
    const bool trainable = lc.get_bool("trainable", true);
    check_dtype(lc);
    auto shape = read_input_shape(lc);
    if (shape) {
      if (model->layers_.empty() && !input_shape)
        input_shape = shape;
      else if (!model->layers_.empty() || *shape != *input_shape)
        throw ConfigError(lc.path(), "only the first layer may give an input shape");
    }
    auto layer = it->second.make(lc, name);
    lc.finish();
    layer->set_trainable(trainable);
    model->layers_.push_back(std::move(layer));
  }
  if (model->layers_.empty()) throw ConfigError(layers_path, "the model has no layers");
  if (!input_shape)
    throw ConfigError(layers_path,
                      "the input shape is unknown: start with an InputLayer or give the first "
                      "layer \"input_shape\"");

  model->input_shape_ = *input_shape;
  model->output_shapes_.push_back(*input_shape);
  for (std::size_t i = 0; i < model->layers_.size(); ++i) {
    try {
      model->output_shapes_.push_back(model->layers_[i]->build(model->output_shapes_.back(), init));
    } catch (const ShapeError& e) {
      throw ConfigError(indexed(layers_path, i + (model->input_layer_config_.is_null() ? 0 : 1)),
                        e.what());
    }
  }
  // A relu moves into the next layer where that layer applies it on a smaller tensor
  // (Conv2D relu -> MaxPooling2D): the same values and gradients, two passes over the large
  // tensor fewer.
  for (std::size_t i = 0; i + 1 < model->layers_.size(); ++i) {
    nn::ReluProducer* layer = nn::relu_producer_of(*model->layers_[i]);
    nn::ReluConsumer* next = nn::relu_consumer_of(*model->layers_[i + 1]);
    if (layer && next && layer->has_output_relu() && next->can_apply_input_relu()) {
      layer->set_output_relu_external(true);
      next->set_apply_input_relu(true);
    }
  }
  return model;
}

std::unique_ptr<Model> Model::clone() const {
  auto copy = from_config(source_config_, "model", seed_);
  copy->copy_weights_from(*this);
  return copy;
}

const Tensor& Model::forward(const Tensor& x, bool training, std::int64_t sample_offset) {
  if (x.rank() != static_cast<int>(input_shape_.size()) + 1 ||
      !std::equal(input_shape_.begin(), input_shape_.end(), x.shape().begin() + 1))
    throw ShapeError("model '" + name_ + "' expects inputs " + shape_to_string(input_shape_, true) +
                     ", got " + shape_to_string(x.shape()));
  const Tensor* h = &x;
  for (auto& layer : layers_) {
    layer->set_sample_offset(sample_offset);
    h = &layer->forward(*h, training);
  }
  return *h;
}

void Model::backward(const Tensor& grad_output) {
  backward(grad_output, [](std::size_t) {});
}

void Model::backward(const Tensor& grad_output,
                     const std::function<void(std::size_t layer)>& after_layer) {
  // Layers before the first one with trainable parameters need no input gradient: stop there.
  std::size_t first = layers_.size();
  for (std::size_t i = 0; i < layers_.size() && first == layers_.size(); ++i)
    if (layers_[i]->trainable())
      for (Parameter* p : layers_[i]->parameters())
        if (p->trainable) first = i;
  const Tensor* g = &grad_output;
  for (std::size_t i = layers_.size(); i-- > first;) {
    g = &layers_[i]->backward(*g, i > first);
    after_layer(i);
  }
  for (std::size_t i = first; i-- > 0;) after_layer(i);
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> out;
  for (auto& layer : layers_)
    for (Parameter* p : layer->parameters()) out.push_back(p);
  return out;
}

std::vector<Parameter*> Model::trainable_parameters() {
  std::vector<Parameter*> out;
  for (auto& layer : layers_)
    if (layer->trainable())
      for (Parameter* p : layer->parameters())
        if (p->trainable) out.push_back(p);
  return out;
}

std::vector<std::string> Model::parameter_names() const {
  std::vector<std::string> out;
  for (const auto& layer : layers_)
    for (Parameter* p : layer->parameters()) out.push_back(layer->name() + "/" + p->name);
  return out;
}

std::int64_t Model::count_params() const {
  std::int64_t n = 0;
  for (const auto& layer : layers_)
    for (Parameter* p : layer->parameters()) n += p->value.size();
  return n;
}

std::int64_t Model::count_trainable_params() const {
  std::int64_t n = 0;
  for (const auto& layer : layers_)
    if (layer->trainable())
      for (Parameter* p : layer->parameters())
        if (p->trainable) n += p->value.size();
  return n;
}

json Model::config() const {
  json layers = json::array();
  if (!input_layer_config_.is_null()) {
    layers.push_back({{"class_name", "InputLayer"}, {"config", input_layer_config_}});
  }
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    json c = layers_[i]->config();
    if (i == 0 && input_layer_config_.is_null()) {
      json shape = json::array({nullptr});
      for (auto d : input_shape_) shape.push_back(d);
      c["batch_input_shape"] = shape;
    }
    layers.push_back({{"class_name", layers_[i]->class_name()}, {"config", c}});
  }
  return {{"class_name", "Sequential"}, {"config", {{"name", name_}, {"layers", layers}}}};
}

namespace {

std::string with_commas(std::int64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string Model::summary() const {
  std::ostringstream out;
  const std::string rule(65, '_'), double_rule(65, '=');
  out << "Model: \"" << name_ << "\"\n" << rule << "\n";
  // Keras' 29-character name column, widened when a "name (Class)" would run into the next one.
  std::size_t name_width = 29;
  for (const auto& layer : layers_)
    name_width = std::max(name_width, layer->name().size() + layer->class_name().size() + 5);
  out << pad(" Layer (type)", name_width) << pad("Output Shape", 26) << "Param #\n"
      << double_rule << "\n";
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::int64_t params = 0;
    for (Parameter* p : layers_[i]->parameters()) params += p->value.size();
    out << pad(" " + layers_[i]->name() + " (" + layers_[i]->class_name() + ")", name_width)
        << pad(shape_to_string(output_shapes_[i + 1], true), 26) << with_commas(params) << "\n";
    out << "\n";
  }
  const std::int64_t total = count_params(), trainable = count_trainable_params();
  out << double_rule << "\n";
  out << "Total params: " << with_commas(total) << "\n";
  out << "Trainable params: " << with_commas(trainable) << "\n";
  out << "Non-trainable params: " << with_commas(total - trainable) << "\n";
  out << rule << "\n";
  return out.str();
}

void Model::copy_weights_from(const Model& other) {
  if (other.layers_.size() != layers_.size())
    throw ShapeError("copy_weights_from: models have different layer counts");
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    auto dst = layers_[i]->parameters();
    auto src = other.layers_[i]->parameters();
    if (dst.size() != src.size())
      throw ShapeError("copy_weights_from: layer '" + layers_[i]->name() + "' differs");
    for (std::size_t j = 0; j < dst.size(); ++j) dst[j]->value.copy_from(src[j]->value);
  }
}

void Model::save_weights(CheckpointData& out) const {
  out.model_config = config();
  out.layers.clear();
  for (const auto& layer : layers_) {
    LayerWeights lw;
    lw.layer = layer->name();
    for (Parameter* p : layer->parameters()) lw.weights.push_back({p->name, p->value.clone()});
    out.layers.push_back(std::move(lw));
  }
}

void Model::load_weights(const CheckpointData& in, const std::string& source) {
  // Pair layers that have weights, in order, as Keras does; names must agree too.
  std::vector<const LayerWeights*> file_layers;
  for (const auto& lw : in.layers)
    if (!lw.weights.empty()) file_layers.push_back(&lw);
  std::vector<Layer*> model_layers;
  for (const auto& layer : layers_)
    if (!layer->parameters().empty()) model_layers.push_back(layer.get());
  if (file_layers.size() != model_layers.size())
    throw DataError(source + ": holds weights for " + std::to_string(file_layers.size()) +
                    " layers, but model '" + name_ + "' has " +
                    std::to_string(model_layers.size()) + " layers with weights");
  for (std::size_t i = 0; i < model_layers.size(); ++i) {
    auto params = model_layers[i]->parameters();
    const auto& lw = *file_layers[i];
    if (lw.weights.size() != params.size())
      throw DataError(source + ": layer '" + lw.layer + "' has " +
                      std::to_string(lw.weights.size()) + " weights, model layer '" +
                      model_layers[i]->name() + "' has " + std::to_string(params.size()));
    for (std::size_t j = 0; j < params.size(); ++j) {
      if (lw.weights[j].value.shape() != params[j]->value.shape())
        throw DataError(source + ": weight '" + lw.layer + "/" + lw.weights[j].name +
                        "' has shape " + shape_to_string(lw.weights[j].value.shape()) +
                        ", model expects " + shape_to_string(params[j]->value.shape()) + " for '" +
                        model_layers[i]->name() + "/" + params[j]->name + "'");
    }
  }
  for (std::size_t i = 0; i < model_layers.size(); ++i) {
    auto params = model_layers[i]->parameters();
    for (std::size_t j = 0; j < params.size(); ++j)
      params[j]->value.copy_from(file_layers[i]->weights[j].value);
  }
}

}  // namespace tandem
