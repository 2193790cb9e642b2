#include "io/hdf5_links.hpp"

namespace tandem {

namespace {

std::string& refused_target() {
  static std::string target;  // guarded by hdf5_mutex()
  return target;
}

// HDF5's external-link traversal callback: called before the other file is opened; a negative
// result fails the traversal there.
herr_t refuse_traversal(const char* /*parent_file*/, const char* /*parent_group*/,
                        const char* child_file, const char* child_object, unsigned* /*flags*/,
                        hid_t /*fapl*/, void* /*data*/) {
  refused_target() =
      std::string(child_file ? child_file : "?") + ":" + (child_object ? child_object : "?");
  return -1;
}

hid_t local_access(hid_t plist_class) {
  const hid_t list = H5Pcreate(plist_class);
  if (list >= 0) refuse_external_links(list);
  return list;
}

}  // namespace

void refuse_external_links(hid_t access_list) {
  H5Pset_elink_cb(access_list, refuse_traversal, nullptr);
}

hid_t local_link_access() {
  static const hid_t list = local_access(H5P_LINK_ACCESS);
  return list;
}

hid_t local_group_access() {
  static const hid_t list = local_access(H5P_GROUP_ACCESS);
  return list;
}

hid_t local_dataset_access() {
  static const hid_t list = local_access(H5P_DATASET_ACCESS);
  return list;
}

std::string take_refused_external_link() {
  std::string target;
  target.swap(refused_target());
  return target;
}

}  // namespace tandem
