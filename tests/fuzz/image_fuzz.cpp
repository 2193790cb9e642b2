// libFuzzer target for the image decoders (data/image_decode.cpp: libjpeg-turbo through
// TurboJPEG, libpng with Tandem's error handling by longjmp): the input is an image file; it is
// decoded in every colour mode, full size and DCT-scaled towards a small target, and resized.
// Every bad file must end as a tandem::Error (DataError, exit code 2) — any other exception, a
// crash, a sanitizer report, a leak or an allocation beyond -rss_limit_mb is a finding.
#include <cstdint>
#include <span>
#include <vector>

#include "data/image_decode.hpp"
#include "tandem/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tandem::data;
  const std::span<const std::uint8_t> bytes(data, size);
  for (const ColorMode mode : {ColorMode::grayscale, ColorMode::rgb, ColorMode::rgba}) {
    for (const int target : {0, 3}) {
      try {
        const DecodedImage image = decode_image(bytes, mode, "fuzz", target, target, target > 0);
        const CropWindow w = centred_window(image.rows, image.cols, 5, 7, target > 0);
        std::vector<float> out(5 * 7 * image.channels);
        resize_bilinear(image, w, 5, 7, 1.0f / 255, out.data());
      } catch (const tandem::Error&) {
      }
    }
  }
  return 0;
}
