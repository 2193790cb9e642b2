#include "nn/indexing_layer.hpp"

#include <algorithm>
#include <set>

#include "backend/ops.hpp"
#include "nn/batch_shape.hpp"
#include "tandem/error.hpp"

namespace tandem::nn {

namespace {

using nlohmann::json;

// Index values beyond this are clamped on reading (a slice's stop of sys.maxsize): every length
// is below it, so the clamped value selects the same, and sums with a length cannot overflow.
constexpr std::int64_t kIndexLimit = std::int64_t{1} << 62;

bool whole(const IndexItem& item) {
  return item.kind == IndexItem::Kind::slice && item.start.value_or(0) == 0 && !item.stop &&
         item.step.value_or(1) == 1;
}

std::string bound_to_string(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string();
}

json bound_to_json(const std::optional<std::int64_t>& v) {
  return v ? json(*v) : json();
}

std::string axes_to_string(const std::vector<std::int64_t>& axes) {
  std::string s;
  for (std::int64_t a : axes) s += (s.empty() ? "" : ", ") + std::to_string(a);
  return "[" + s + "]";
}

// Python's slice.indices: the first position and the count of `length` positions a slice takes.
Indexing::AxisPick slice_pick(const IndexItem& item, std::int64_t length) {
  const std::int64_t step = item.step.value_or(1);
  Indexing::AxisPick pick;
  pick.step = step;
  if (step > 0) {
    const auto clamp = [&](std::int64_t v) {
      return v < 0 ? std::max<std::int64_t>(v + length, 0) : std::min(v, length);
    };
    const std::int64_t start = item.start ? clamp(*item.start) : 0;
    const std::int64_t stop = item.stop ? clamp(*item.stop) : length;
    pick.start = start;
    pick.count = stop > start ? (stop - start + step - 1) / step : 0;
  } else {
    const auto clamp = [&](std::int64_t v) {
      return v < 0 ? std::max<std::int64_t>(v + length, -1) : std::min(v, length - 1);
    };
    const std::int64_t start = item.start ? clamp(*item.start) : length - 1;
    const std::int64_t stop = item.stop ? clamp(*item.stop) : -1;
    pick.start = start;
    pick.count = start > stop ? (start - stop - step - 1) / -step : 0;
  }
  if (pick.count == 1) pick.step = 1;  // one position: its step is no matter (nor overflows)
  return pick;
}

}  // namespace

std::string index_to_string(const std::vector<IndexItem>& items) {
  std::string s;
  for (const IndexItem& item : items) {
    if (!s.empty()) s += ", ";
    switch (item.kind) {
      case IndexItem::Kind::position:
        s += std::to_string(item.position);
        break;
      case IndexItem::Kind::slice:
        s += bound_to_string(item.start) + ":" + bound_to_string(item.stop);
        if (item.step) s += ":" + std::to_string(*item.step);
        break;
      case IndexItem::Kind::new_axis:
        s += "None";
        break;
      case IndexItem::Kind::rest:
        s += "...";
        break;
    }
  }
  return "x[" + s + "]";
}

std::unique_ptr<Indexing> Indexing::indexing(std::string name, std::vector<IndexItem> items) {
  std::unique_ptr<Indexing> layer(new Indexing(std::move(name), Mode::index));
  layer->items_ = std::move(items);
  return layer;
}

std::unique_ptr<Indexing> Indexing::expanding(std::string name, std::vector<std::int64_t> axes) {
  std::unique_ptr<Indexing> layer(new Indexing(std::move(name), Mode::expand));
  layer->axes_ = std::move(axes);
  return layer;
}

std::unique_ptr<Indexing> Indexing::squeezing(std::string name,
                                              std::optional<std::vector<std::int64_t>> axes) {
  std::unique_ptr<Indexing> layer(new Indexing(std::move(name), Mode::squeeze));
  layer->every_unit_axis_ = !axes;
  if (axes) layer->axes_ = std::move(*axes);
  return layer;
}

void Indexing::refuse(const std::string& why) const {
  std::string what;
  if (mode_ == Mode::index) what = index_to_string(items_);
  if (mode_ == Mode::expand) what = "expand_dims(x, " + axes_to_string(axes_) + ")";
  if (mode_ == Mode::squeeze)
    what = every_unit_axis_ ? "squeeze(x)" : "squeeze(x, " + axes_to_string(axes_) + ")";
  throw ShapeError("layer '" + name() + "' (" + what + ") on inputs " +
                   shape_to_string(input_shape_, true) + ": " + why);
}

std::vector<IndexItem> Indexing::index_for(const Shape& input) const {
  if (mode_ == Mode::index) return items_;
  const auto rank = static_cast<std::int64_t>(input.size()) +
                    (mode_ == Mode::expand ? static_cast<std::int64_t>(axes_.size()) : 0);
  std::set<std::int64_t> axes;
  for (std::int64_t a : axes_) {
    const std::int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank)
      refuse("axis " + std::to_string(a) + " is out of range for " + std::to_string(rank) +
             " axes (the batch counted)");
    if (axis == 0)
      refuse(mode_ == Mode::expand ? "adds an axis before the batch axis"
                                   : "drops the batch axis, which stays");
    if (!axes.insert(axis).second) refuse("names axis " + std::to_string(axis) + " twice");
  }
  std::vector<IndexItem> items;
  for (std::int64_t a = 0; a < rank; ++a) {
    if (mode_ == Mode::expand) {
      items.push_back(axes.count(a) ? IndexItem::new_axis() : IndexItem::all());
      continue;
    }
    const std::int64_t length = input[static_cast<std::size_t>(a)];
    const bool squeezed = axes.count(a) || (every_unit_axis_ && a > 0 && length == 1);
    if (axes.count(a) && length != 1)
      refuse("axis " + std::to_string(a) + " has length " + std::to_string(length) + ", not 1");
    items.push_back(squeezed ? IndexItem::at(0) : IndexItem::all());
  }
  return items;
}

Shape Indexing::build(const Shape& input_shape, Rng&) {
  input_shape_ = input_shape;
  const Shape full = with_batch(1, input_shape);  // the batch's length is no matter
  const auto rank = static_cast<std::int64_t>(full.size());
  if (rank > backend::StridedView::kMaxRank)
    refuse("inputs of more than " + std::to_string(backend::StridedView::kMaxRank - 1) +
           " axes per sample are not supported");
  std::vector<IndexItem> items = index_for(full);
  const auto takes_axis = [](const IndexItem& i) {
    return i.kind == IndexItem::Kind::position || i.kind == IndexItem::Kind::slice;
  };
  const auto taken = std::count_if(items.begin(), items.end(), takes_axis);
  const auto rests = std::count_if(items.begin(), items.end(), [](const IndexItem& i) {
    return i.kind == IndexItem::Kind::rest;
  });
  if (rests > 1) refuse("an index can only have a single ellipsis ('...')");
  if (taken > rank)
    refuse("indexes " + std::to_string(taken) + " axes of inputs with " + std::to_string(rank) +
           " (the batch counted)");
  // The ellipsis (implied at the end) as the whole axes it stands for.
  std::vector<IndexItem> expanded;
  if (rests == 0) items.push_back(IndexItem::rest());
  for (const IndexItem& item : items) {
    if (item.kind != IndexItem::Kind::rest) {
      expanded.push_back(item);
      continue;
    }
    for (std::int64_t k = taken; k < rank; ++k) expanded.push_back(IndexItem::all());
  }
  Shape out;
  picks_.clear();
  std::int64_t axis = 0;
  for (const IndexItem& item : expanded) {
    if (item.kind == IndexItem::Kind::new_axis) {
      if (axis == 0) refuse("adds an axis before the batch axis");
      out.push_back(1);
      continue;
    }
    if (axis == 0) {
      if (!whole(item)) refuse("indexes the batch axis (axis 0), which stays whole");
      ++axis;
      continue;
    }
    const std::int64_t length = full[static_cast<std::size_t>(axis)];
    AxisPick pick;
    if (item.kind == IndexItem::Kind::position) {
      const std::int64_t p = item.position < 0 ? item.position + length : item.position;
      if (p < 0 || p >= length)
        refuse("index " + std::to_string(item.position) + " is out of range for axis " +
               std::to_string(axis) + " of length " + std::to_string(length));
      pick = {p, 1, 1, false};
    } else {
      if (item.step.value_or(1) == 0) refuse("slice step cannot be zero");
      pick = slice_pick(item, length);
      if (pick.count == 0)
        refuse("takes no values of axis " + std::to_string(axis) + " (length " +
               std::to_string(length) + ")");
      out.push_back(pick.count);
    }
    picks_.push_back(pick);
    ++axis;
  }
  output_shape_ = out;
  // The view over a batch: the samples, then each kept axis.
  view_ = backend::StridedView();
  std::int64_t stride = shape_size(input_shape);
  view_.rank = 1;
  view_.strides[0] = stride;
  std::vector<std::int64_t> strides(picks_.size());
  for (std::size_t a = picks_.size(); a-- > 0;) {
    strides[a] = a + 1 < picks_.size() ? strides[a + 1] * input_shape[a + 1] : 1;
  }
  reshape_only_ = true;
  for (std::size_t a = 0; a < picks_.size(); ++a) {
    const AxisPick& p = picks_[a];
    reshape_only_ = reshape_only_ && p.start == 0 && p.step == 1 && p.count == input_shape[a];
    view_.offset += p.start * strides[a];
    if (!p.kept) continue;
    view_.dims[view_.rank] = p.count;
    view_.strides[view_.rank] = p.step * strides[a];
    ++view_.rank;
  }
  return output_shape_;
}

const Tensor& Indexing::forward(const Tensor& x, bool) {
  require_batch_of(x, input_shape_, "layer '" + name() + "' (" + class_name() + ")");
  const std::int64_t batch = x.dim(0);
  if (reshape_only_) {
    output_ = x.reshaped(with_batch(batch, output_shape_));
    return output_;
  }
  Tensor& y = ops().place(output_, with_batch(batch, output_shape_));
  backend::StridedView view = view_;
  view.dims[0] = batch;
  if (batch > 0) ops().gather_view(view, x, y);
  return output_;
}

const Tensor& Indexing::backward(const Tensor& grad_output, bool need_input_grad) {
  if (!need_input_grad) {
    grad_input_ = Tensor();
    return grad_input_;
  }
  require_batch_of(grad_output, output_shape_,
                   "layer '" + name() + "' (" + class_name() + ") gradient");
  const std::int64_t batch = grad_output.dim(0);
  if (reshape_only_) {
    grad_input_ = grad_output.reshaped(with_batch(batch, input_shape_));
    return grad_input_;
  }
  Tensor& dx = ops().place(grad_input_, with_batch(batch, input_shape_));
  ops().fill(dx, 0.0f);
  backend::StridedView view = view_;
  view.dims[0] = batch;
  if (batch > 0) ops().scatter_view(view, grad_output, dx);
  return grad_input_;
}

json Indexing::config() const {
  json c = {{"name", name()}, {"trainable", trainable()}, {"dtype", "float32"}};
  if (mode_ == Mode::expand) c["expand_axes"] = axes_;
  if (mode_ == Mode::squeeze) c["squeeze_axes"] = every_unit_axis_ ? json() : json(axes_);
  if (mode_ != Mode::index) return c;
  json index = json::array();
  for (const IndexItem& item : items_) {
    switch (item.kind) {
      case IndexItem::Kind::position:
        index.push_back(item.position);
        break;
      case IndexItem::Kind::slice:
        index.push_back({{"start", bound_to_json(item.start)},
                         {"stop", bound_to_json(item.stop)},
                         {"step", bound_to_json(item.step)}});
        break;
      case IndexItem::Kind::new_axis:
        index.push_back(nullptr);
        break;
      case IndexItem::Kind::rest:
        index.push_back("...");
        break;
    }
  }
  c["index"] = index;
  return c;
}

namespace {

// An integer of an index at `path`, clamped to ±kIndexLimit.
std::int64_t index_integer(const json& v, const std::string& path, const char* what) {
  if (v.is_number_unsigned())
    return static_cast<std::int64_t>(std::min<std::uint64_t>(v.get<std::uint64_t>(), kIndexLimit));
  if (!v.is_number_integer())
    throw ConfigError(path, std::string("expected ") + what + ", an integer, got " + v.dump());
  return std::clamp(v.get<std::int64_t>(), -kIndexLimit, kIndexLimit);
}

std::optional<std::int64_t> slice_bound(const json& slice, const char* key,
                                        const std::string& path) {
  const auto it = slice.find(key);
  if (it == slice.end() || it->is_null()) return std::nullopt;
  return index_integer(*it, path + "." + key, "a slice bound");
}

IndexItem read_index_item(const json& v, const std::string& path) {
  if (v.is_null()) return IndexItem::new_axis();
  if (v.is_string() && v.get<std::string>() == "...") return IndexItem::rest();
  if (v.is_number()) return IndexItem::at(index_integer(v, path, "a position"));
  if (v.is_object()) {
    for (const auto& [key, value] : v.items())
      if (key != "start" && key != "stop" && key != "step")
        throw ConfigError(path + "." + key, "unknown key of a slice (start, stop, step)");
    IndexItem item = IndexItem::all();
    item.start = slice_bound(v, "start", path);
    item.stop = slice_bound(v, "stop", path);
    item.step = slice_bound(v, "step", path);
    if (item.step == 0) throw ConfigError(path + ".step", "a slice's step cannot be 0");
    return item;
  }
  throw ConfigError(path,
                    "expected an integer, null (a new axis), \"...\" or a slice {\"start\", "
                    "\"stop\", \"step\"}, got " +
                        v.dump());
}

std::vector<std::int64_t> read_axes(const json& v, const std::string& path) {
  if (!v.is_array()) throw ConfigError(path, "expected a list of axes (integers), got " + v.dump());
  std::vector<std::int64_t> axes;
  for (std::size_t i = 0; i < v.size(); ++i)
    axes.push_back(index_integer(v[i], path + "[" + std::to_string(i) + "]", "an axis"));
  return axes;
}

}  // namespace

std::unique_ptr<Layer> make_indexing_layer(ConfigObject& c, const std::string& name) {
  const bool index = c.has("index"), expand = c.has("expand_axes"),
             squeeze = c.given("squeeze_axes");
  if (index + expand + squeeze != 1)
    throw ConfigError(c.path(),
                      "expected exactly one of \"index\", \"expand_axes\" and \"squeeze_axes\"");
  if (expand)
    return Indexing::expanding(name, read_axes(c.at("expand_axes"), c.path_of("expand_axes")));
  if (squeeze) {
    const json* axes = c.find("squeeze_axes");
    return Indexing::squeezing(
        name, axes ? std::optional(read_axes(*axes, c.path_of("squeeze_axes"))) : std::nullopt);
  }
  const json& list = c.at("index");
  const std::string path = c.path_of("index");
  if (!list.is_array())
    throw ConfigError(path, "expected a list of index items, got " + list.dump());
  std::vector<IndexItem> items;
  for (std::size_t i = 0; i < list.size(); ++i)
    items.push_back(read_index_item(list[i], path + "[" + std::to_string(i) + "]"));
  return Indexing::indexing(name, std::move(items));
}

}  // namespace tandem::nn
