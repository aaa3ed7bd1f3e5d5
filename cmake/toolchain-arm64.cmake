# Cross-compiling isolation-gate for linux/arm64 with Debian's multiarch
# toolchain (scripts/install-deps.sh --release installs it):
#   crossbuild-essential-arm64   aarch64-linux-gnu-g++ and the arm64 libc
#   libcpprest-dev:arm64 libssl-dev:arm64 libboost-dev:arm64
#   libboost-system-dev:arm64    arm64 libraries beside the amd64 ones
#                                (/usr/lib/aarch64-linux-gnu)
#   .cache/arm64-dev             libyaml-cpp-dev:arm64 unpacked (not
#                                Multi-Arch: same, so not installed)
# Header-only and architecture-independent packages (nlohmann-json3-dev,
# libcli11-dev) are the installed ones.
#
#   cmake -S . -B build-arm64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm64.cmake -DIG_BUILD_TESTS=OFF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

get_filename_component(_ig_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
# / first: find_package looks in <root>/usr/lib/aarch64-linux-gnu/cmake (the
# multiarch directory, from CMAKE_LIBRARY_ARCHITECTURE), never in the amd64
# one; then the unpacked libyaml-cpp-dev:arm64.
set(CMAKE_FIND_ROOT_PATH / /usr/aarch64-linux-gnu "${_ig_root}/.cache/arm64-dev")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Only arm64 libraries: no amd64 directory is searched.
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu)

# pkg-config (if a find module uses it) reads the arm64 .pc files.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# The linker resolves the libraries' own dependencies in the multiarch
# directory (cpprest's Boost, zlib, brotli).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,/lib/aarch64-linux-gnu")

# No build-tree RUNPATH: the unpacked libyaml-cpp-dev's directory would
# otherwise be written into the binary (the image and the CLI tarball find
# their libraries in the system directories and in $ORIGIN/../lib).
set(CMAKE_SKIP_BUILD_RPATH ON)

# Tests and tools built for arm64 run under qemu-user-static.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L /usr/aarch64-linux-gnu)
