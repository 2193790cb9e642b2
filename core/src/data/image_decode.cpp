#include "data/image_decode.hpp"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <memory>

#include "tandem/error.hpp"

namespace tandem::data {

namespace {

// Larger images are refused before anything is allocated (PIL refuses above 179 million pixels,
// as a decompression bomb).
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 28;

void check_dimensions(std::int64_t rows, std::int64_t cols, const std::string& name) {
  if (rows <= 0 || cols <= 0 || rows * cols > kMaxPixels)
    throw DataError(name + ": the image is " + std::to_string(cols) + "x" + std::to_string(rows) +
                    " pixels; expected at least 1x1 and at most " + std::to_string(kMaxPixels) +
                    " pixels");
}

// ITU-R 601 luma, rounded as PIL's convert("L") rounds it.
std::uint8_t luma(const std::uint8_t* rgb) {
  return static_cast<std::uint8_t>((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >>
                                   16);
}

// ---- JPEG ---------------------------------------------------------------------------------------

struct TjHandleDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};

// One decompressor per thread, made on first use and kept for the thread's life; made anew
// after a file it failed on (a TurboJPEG handle keeps state from a failed decode: the next
// header may then read as 0x0).
std::unique_ptr<void, TjHandleDeleter>& thread_handle() {
  thread_local std::unique_ptr<void, TjHandleDeleter> handle;
  return handle;
}

tjhandle thread_decompressor() {
  auto& handle = thread_handle();
  if (!handle) handle.reset(tjInitDecompress());
  if (!handle)
    throw DataError(std::string("cannot start a JPEG decoder: ") + tjGetErrorStr2(nullptr));
  return handle.get();
}

[[noreturn]] void jpeg_failed(tjhandle tj, const std::string& name) {
  const std::string why = tjGetErrorStr2(tj);
  thread_handle().reset();
  throw DataError(name + ": a corrupt or truncated JPEG (" + why + ")");
}

// The smallest DCT scaling of a rows x cols image whose target window is still at least the
// target's size; 1/1 when there is none smaller.
tjscalingfactor jpeg_scaling(int rows, int cols, int target_rows, int target_cols,
                             bool keep_aspect) {
  tjscalingfactor best{1, 1};
  if (target_rows <= 0 || target_cols <= 0) return best;
  // PIL's draft rule: 1/n when the image (its window) is at least n times the target each way.
  const CropWindow full = centred_window(rows, cols, target_rows, target_cols, keep_aspect);
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; i < count; ++i) {
    const tjscalingfactor f = factors[i];
    // Only 1/2, 1/4 and 1/8, as PIL's draft mode: the other factors' scaled IDCTs are rarer.
    if (f.num != 1 || (f.denom != 2 && f.denom != 4 && f.denom != 8)) continue;
    if (f.num * best.denom >= best.num * f.denom) continue;  // not smaller than the best so far
    if (full.rows / f.denom < target_rows || full.cols / f.denom < target_cols) continue;
    const int r = TJSCALED(rows, f), c = TJSCALED(cols, f);
    const CropWindow w = centred_window(r, c, target_rows, target_cols, keep_aspect);
    if (w.rows >= target_rows && w.cols >= target_cols) best = f;
  }
  return best;
}

DecodedImage decode_jpeg(std::span<const std::uint8_t> bytes, ColorMode mode,
                         const std::string& name, int target_rows, int target_cols,
                         bool keep_aspect) {
  tjhandle tj = thread_decompressor();
  int cols = 0, rows = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), &cols, &rows,
                          &subsampling, &colorspace) != 0)
    jpeg_failed(tj, name);
  check_dimensions(rows, cols, name);
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    throw DataError(name +
                    ": a CMYK JPEG; convert it to RGB (e.g. PIL: Image.open(f).convert('RGB'))");
  const tjscalingfactor f = jpeg_scaling(rows, cols, target_rows, target_cols, keep_aspect);
  DecodedImage image;
  image.rows = TJSCALED(rows, f);
  image.cols = TJSCALED(cols, f);
  image.channels = channels_of(mode);
  image.pixels.resize(static_cast<std::size_t>(image.rows) * image.cols * image.channels);
  const int format = mode == ColorMode::grayscale ? TJPF_GRAY
                     : mode == ColorMode::rgb     ? TJPF_RGB
                                                  : TJPF_RGBA;
  // A truncated file is only a warning to libjpeg (it fills the rest with grey): stop on it.
  if (tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), image.pixels.data(),
                    image.cols, 0, image.rows, format, TJFLAG_STOPONWARNING) != 0)
    jpeg_failed(tj, name);
  return image;
}

// ---- PNG ----------------------------------------------------------------------------------------

struct PngSource {
  const std::uint8_t* data;
  std::size_t size, at;
  char message[200];
  std::int64_t rows = 0, cols = 0;  // set when the header declares too many pixels
};

void png_read_from_memory(png_structp png, png_bytep out, png_size_t count) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (count > src->size - src->at) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, src->data + src->at, count);
  src->at += count;
}

void png_record_error(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", message);
  png_longjmp(png, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

// Decodes into `pixels` (resized here) with 8 bits per channel: 1 (gray), 2 (gray, alpha),
// 3 (RGB) or 4 (RGBA) channels as the file has them; `rows` holds the row pointers. Returns
// false with src->message set on error. libpng leaves this frame by longjmp, so every object
// that owns memory (pixels, rows) is the caller's, and no local changes after setjmp but the
// libpng structs, which libpng itself frees.
bool read_png(PngSource* src, std::vector<std::uint8_t>* pixels, std::vector<png_bytep>* rows,
              int* height, int* width, int* channels) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, src, png_record_error, png_ignore_warning);
  if (png == nullptr) {
    std::snprintf(src->message, sizeof src->message, "cannot start a PNG decoder");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, src, png_read_from_memory);
  png_set_user_limits(png, 1u << 20, 1u << 20);
  png_read_info(png, info);
  const std::int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (w * h > kMaxPixels) {  // not damage: decode_png names the size as JPEGs' is named
    src->rows = h;
    src->cols = w;
    png_error(png, "too many pixels");
  }
  const int color = png_get_color_type(png, info);
  if (png_get_bit_depth(png, info) == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *height = static_cast<int>(h);
  *width = static_cast<int>(w);
  *channels = png_get_channels(png, info);
  const std::size_t row_bytes = png_get_rowbytes(png, info);
  if (row_bytes != static_cast<std::size_t>(w) * static_cast<std::size_t>(*channels))
    png_error(png, "an unexpected pixel layout after conversion to 8 bits");
  pixels->resize(row_bytes * static_cast<std::size_t>(h));
  rows->resize(static_cast<std::size_t>(h));
  for (std::int64_t r = 0; r < h; ++r)
    (*rows)[static_cast<std::size_t>(r)] = pixels->data() + r * row_bytes;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// `in` (1-4 channels as read_png gives them) into `mode`'s channels: alpha dropped or made
// opaque, grey replicated, colour to luma.
DecodedImage to_color_mode(const std::vector<std::uint8_t>& in, int rows, int cols, int in_ch,
                           ColorMode mode) {
  DecodedImage out;
  out.rows = rows;
  out.cols = cols;
  out.channels = channels_of(mode);
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  out.pixels.resize(n * out.channels);
  const bool colour = in_ch >= 3, alpha = in_ch == 2 || in_ch == 4;
  for (std::size_t p = 0; p < n; ++p) {
    const std::uint8_t* s = in.data() + p * in_ch;
    std::uint8_t* d = out.pixels.data() + p * out.channels;
    if (mode == ColorMode::grayscale) {
      d[0] = colour ? luma(s) : s[0];
      continue;
    }
    for (int c = 0; c < 3; ++c) d[c] = colour ? s[c] : s[0];
    if (mode == ColorMode::rgba) d[3] = alpha ? s[in_ch - 1] : 255;
  }
  return out;
}

DecodedImage decode_png(std::span<const std::uint8_t> bytes, ColorMode mode,
                        const std::string& name) {
  PngSource src{bytes.data(), bytes.size(), 0, {}};
  std::vector<std::uint8_t> pixels;
  std::vector<png_bytep> row_pointers;
  int rows = 0, cols = 0, channels = 0;
  if (!read_png(&src, &pixels, &row_pointers, &rows, &cols, &channels)) {
    if (src.rows > 0) check_dimensions(src.rows, src.cols, name);
    throw DataError(name + ": a corrupt or truncated PNG (" + src.message + ")");
  }
  check_dimensions(rows, cols, name);
  if (channels == channels_of(mode))  // as the file has it: nothing to convert
    return DecodedImage{rows, cols, channels, std::move(pixels)};
  return to_color_mode(pixels, rows, cols, channels, mode);
}

bool starts_with(std::span<const std::uint8_t> bytes, std::initializer_list<int> magic) {
  if (bytes.size() < magic.size()) return false;
  std::size_t i = 0;
  for (int m : magic)
    if (m >= 0 && bytes[i++] != m)
      return false;
    else if (m < 0)
      ++i;
  return true;
}

}  // namespace

int channels_of(ColorMode mode) {
  return mode == ColorMode::grayscale ? 1 : mode == ColorMode::rgb ? 3 : 4;
}

ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes, const std::string& name) {
  if (starts_with(bytes, {0xFF, 0xD8, 0xFF})) return ImageFormat::jpeg;
  if (starts_with(bytes, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'})) return ImageFormat::png;
  std::string what = "neither JPEG nor PNG";
  if (bytes.empty())
    what = "an empty file";
  else if (starts_with(bytes, {'G', 'I', 'F', '8'}))
    what = "a GIF image";
  else if (starts_with(bytes, {'B', 'M'}))
    what = "a BMP image";
  else if (starts_with(bytes, {'R', 'I', 'F', 'F', -1, -1, -1, -1, 'W', 'E', 'B', 'P'}))
    what = "a WebP image";
  else if (starts_with(bytes, {'I', 'I', 42, 0}) || starts_with(bytes, {'M', 'M', 0, 42}))
    what = "a TIFF image";
  throw DataError(name + ": " + what + "; the images dataset reads JPEG and PNG files");
}

DecodedImage decode_image(std::span<const std::uint8_t> bytes, ColorMode mode,
                          const std::string& name, int target_rows, int target_cols,
                          bool keep_aspect) {
  if (sniff_image_format(bytes, name) == ImageFormat::jpeg)
    return decode_jpeg(bytes, mode, name, target_rows, target_cols, keep_aspect);
  return decode_png(bytes, mode, name);
}

CropWindow centred_window(int rows, int cols, int target_rows, int target_cols, bool keep_aspect) {
  CropWindow w{0, 0, rows, cols};
  if (!keep_aspect || target_rows <= 0 || target_cols <= 0) return w;
  // The largest window of the target's aspect ratio: full height or full width.
  const std::int64_t by_height = std::int64_t{rows} * target_cols;  // cols needed at full height
  if (by_height <= std::int64_t{cols} * target_rows) {
    w.cols = std::max(1, static_cast<int>(by_height / target_rows));
  } else {
    w.rows = std::max(1, static_cast<int>(std::int64_t{cols} * target_rows / target_cols));
  }
  w.row = (rows - w.rows) / 2;
  w.col = (cols - w.cols) / 2;
  return w;
}

namespace {

// Half-pixel source coordinates of an axis: for each output index its two input indices and the
// weight of the second.
struct AxisTaps {
  std::vector<int> lo, hi;
  std::vector<float> frac;
};

AxisTaps axis_taps(int in_size, int out_size, int offset) {
  AxisTaps t;
  t.lo.resize(out_size);
  t.hi.resize(out_size);
  t.frac.resize(out_size);
  const double scale = static_cast<double>(in_size) / out_size;
  for (int o = 0; o < out_size; ++o) {
    const double src = std::max(0.0, (o + 0.5) * scale - 0.5);
    const int lo = std::min(static_cast<int>(src), in_size - 1);
    t.lo[o] = offset + lo;
    t.hi[o] = offset + std::min(lo + 1, in_size - 1);
    t.frac[o] = static_cast<float>(src - lo);
  }
  return t;
}

}  // namespace

void resize_bilinear(const DecodedImage& image, CropWindow w, int rows, int cols, float scale,
                     float* out) {
  const int ch = image.channels;
  const std::uint8_t* px = image.pixels.data();
  const std::size_t stride = static_cast<std::size_t>(image.cols) * ch;
  if (w.rows == rows && w.cols == cols) {  // no resampling: the window's pixels, scaled
    for (int r = 0; r < rows; ++r) {
      const std::uint8_t* s = px + (w.row + r) * stride + static_cast<std::size_t>(w.col) * ch;
      for (int k = 0; k < cols * ch; ++k) *out++ = s[k] * scale;
    }
    return;
  }
  const AxisTaps y = axis_taps(w.rows, rows, w.row), x = axis_taps(w.cols, cols, w.col);
  for (int r = 0; r < rows; ++r) {
    const std::uint8_t* top = px + y.lo[r] * stride;
    const std::uint8_t* bottom = px + y.hi[r] * stride;
    const float fy = y.frac[r];
    for (int c = 0; c < cols; ++c) {
      const std::size_t l = static_cast<std::size_t>(x.lo[c]) * ch,
                        h = static_cast<std::size_t>(x.hi[c]) * ch;
      const float fx = x.frac[c];
      for (int k = 0; k < ch; ++k) {
        const float t = top[l + k] + (top[h + k] - top[l + k]) * fx;
        const float b = bottom[l + k] + (bottom[h + k] - bottom[l + k]) * fx;
        *out++ = (t + (b - t) * fy) * scale;
      }
    }
  }
}

}  // namespace tandem::data
