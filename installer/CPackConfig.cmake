# Packaging: DEB (with a -dbgsym package holding the debug symbols) and TGZ through CPack:
# `cpack -G DEB --config build/default/CPackConfig.cmake`; installer/check_deb.sh builds the DEB,
# runs lintian and installs and runs it in a clean Debian 12 root.
set(POOLSCOPE_PACKAGE_MAINTAINER "PoolScope maintainers <maintainers@users.noreply.a-seed-74d679f8.example>"
    CACHE STRING "Maintainer field of the Debian package (Name <address>)")

# Debian's documentation files: the machine-readable copyright, and the changelog that lintian
# expects gzipped with no timestamp (gzip -n) for a reproducible package.
set(_changelog_gz ${CMAKE_BINARY_DIR}/installer/changelog.Debian.gz)
add_custom_command(OUTPUT ${_changelog_gz}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/installer
  COMMAND gzip -9 -n -c ${CMAKE_CURRENT_LIST_DIR}/debian/changelog > ${_changelog_gz}
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/debian/changelog VERBATIM)
add_custom_target(poolscope_changelog ALL DEPENDS ${_changelog_gz})
install(FILES ${CMAKE_CURRENT_LIST_DIR}/debian/copyright ${_changelog_gz}
        DESTINATION share/doc/poolscope)

set(CPACK_PACKAGE_NAME "poolscope")
set(CPACK_PACKAGE_VENDOR "PoolScope")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${POOLSCOPE_PACKAGE_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR "TGZ;DEB")
# Stripping: the TGZ strips (CPackOptions.cmake); the DEB strips itself while it moves the debug
# symbols into poolscope-dbgsym (CPACK_DEBIAN_DEBUGINFO_PACKAGE needs them still there).
set(CPACK_PROJECT_CONFIG_FILE "${CMAKE_CURRENT_LIST_DIR}/CPackOptions.cmake")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")

set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${POOLSCOPE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Extended description: continuation lines of the control field start with a space; an empty
# line is " .".
# The extended description: CPack puts the summary first and indents each line; an empty line
# becomes the " ." paragraph break.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "PoolScope records every asynchronous allocation and free, pool operation,
event record and wait, synchronize and implicit release of a CUDA program
that uses the stream-ordered allocator (cudaMallocAsync, memory pools),
with the pools' reserved and used memory, and replays the recording per
stream to show why reserved GPU memory grew, and on which stream.

The package holds the command-line tool (record, info, report, dump, ctl),
the desktop window and the CUPTI collector module. Recording needs the
NVIDIA driver and the CUDA toolkit's CUPTI library on the GPU machine; they
are looked up at run time, so the package installs without them and opens
traces anywhere.")
# Library dependencies from dpkg-shlibdeps. None of the binaries links the NVIDIA driver or
# CUPTI (the collector loads them at run time, collector/src/CudaLibs.h): the driver is often
# installed outside dpkg (NVIDIA's .run installer, container runtimes), so a Depends on it
# would refuse to install on exactly the GPU servers the package is for.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libzstd is opened at run time (core/src/Zstd.cpp), so dpkg-shlibdeps cannot see it: traces are
# written and read compressed with it (without it they are written uncompressed, and compressed
# ones cannot be read). libzstd1 is in every Debian installation (dpkg depends on it).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libzstd1")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "shared-mime-info, desktop-file-utils")
# Stripped binaries in the package, their debug symbols in poolscope-dbgsym (a .ddeb).
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "")
include(CPack)
