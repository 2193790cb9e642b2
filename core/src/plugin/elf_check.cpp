#include "plugin/elf_check.hpp"

#include <elf.h>

#include <cstdint>
#include <fstream>
#include <vector>

namespace tandem {

namespace {

#if defined(__x86_64__)
constexpr std::uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr std::uint16_t kMachine = EM_AARCH64;
#else
#error "elf_check: add this architecture's ELF machine"
#endif

// Whether [offset, offset + length) lies inside a file of `size` bytes (no overflow).
bool inside(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

std::string truncated(const char* what, std::uint64_t end, std::uint64_t size) {
  return std::string("truncated: its ") + what + " ends at byte " + std::to_string(end) +
         ", the file has " + std::to_string(size) + " bytes";
}

}  // namespace

std::string elf_problem(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return "cannot read its size: " + ec.message();
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr h{};
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h))
    return "not a shared library: " + std::to_string(size) + " bytes, shorter than an ELF header";
  if (h.e_ident[EI_MAG0] != ELFMAG0 || h.e_ident[EI_MAG1] != ELFMAG1 ||
      h.e_ident[EI_MAG2] != ELFMAG2 || h.e_ident[EI_MAG3] != ELFMAG3)
    return "not a shared library (no ELF header)";
  if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB ||
      h.e_machine != kMachine)
    return "an ELF file for another machine (class, byte order or architecture)";
  if (h.e_type != ET_DYN) return "an ELF file that is not a shared library";
  if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0)
    return "a shared library without program headers";
  const std::uint64_t ph_bytes = std::uint64_t{h.e_phnum} * sizeof(Elf64_Phdr);
  if (!inside(h.e_phoff, ph_bytes, size))
    return truncated("program header table", h.e_phoff + ph_bytes, size);
  if (h.e_shnum > 0) {
    const std::uint64_t sh_bytes = std::uint64_t{h.e_shnum} * h.e_shentsize;
    if (!inside(h.e_shoff, sh_bytes, size))
      return truncated("section header table", h.e_shoff + sh_bytes, size);
  }
  std::vector<Elf64_Phdr> ph(h.e_phnum);
  in.seekg(static_cast<std::streamoff>(h.e_phoff));
  if (!in.read(reinterpret_cast<char*>(ph.data()), static_cast<std::streamsize>(ph_bytes)))
    return "cannot read its program headers";
  for (const Elf64_Phdr& p : ph)
    if (p.p_type == PT_LOAD && !inside(p.p_offset, p.p_filesz, size))
      return truncated("loadable segment", p.p_offset + p.p_filesz, size);
  return {};
}

}  // namespace tandem
