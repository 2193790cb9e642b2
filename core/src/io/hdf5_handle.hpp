// RAII ownership of HDF5 identifiers, and HDF5 error text. Use only while holding hdf5_mutex().
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

namespace tandem {

/// Owns one HDF5 identifier and releases it with the matching close function (H5Fclose,
/// H5Gclose, H5Dclose, H5Aclose, H5Sclose, H5Tclose, H5Pclose).
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);

  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  H5Handle(H5Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      close();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle() { close(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

  /// Closes now and reports the result (negative on failure); the handle is empty afterwards.
  herr_t close() {
    herr_t result = 0;
    if (id_ >= 0 && closer_) result = closer_(id_);
    id_ = H5I_INVALID_HID;
    return result;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

/// The most specific message on HDF5's error stack of this thread ("truncated file: eof = 10,
/// sblock->base_addr = 0, stored_eof = 2144") on one line, or "" when the stack is empty.
/// Clears the stack.
inline std::string hdf5_error_text() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* err, void* out) -> herr_t {
        if (n == 0 && err && err->desc) *static_cast<std::string*>(out) = err->desc;
        return 0;
      },
      &text);
  H5Eclear2(H5E_DEFAULT);
  for (char& c : text)
    if (c == '\n') c = ' ';  // "time = Sat Nov 21 05:44:07 2026\n, filename = ..."
  return text;
}

}  // namespace tandem
