// A shared library that is not a Tandem plugin: it exports no tandem_plugin_abi_version().
extern "C" __attribute__((visibility("default"))) int not_a_plugin_answer() {
  return 42;
}
