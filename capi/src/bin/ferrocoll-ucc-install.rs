//! `ferrocoll-ucc-install`: install `libucc.so.1` as UCC would be installed.
//!
//! ```text
//! cargo run --release -p ferrocoll-capi --bin ferrocoll-ucc-install -- --prefix /opt/ferrocoll-ucc
//! ```
//!
//! Under the prefix: `lib/libucc.so.1` (and `lib/libucc.so` pointing to it),
//! `include/ucc/api/*.h`, `lib/pkgconfig/ucc.pc`, and the CMake package
//! `lib/cmake/ucc/ucc-config.cmake` (imported target `ucc::ucc`, what
//! `find_package(UCC)` looks for) with its version file. Programs built
//! against UCC then run on ferrocoll with `LD_LIBRARY_PATH=<prefix>/lib`.
//!
//! The library copied is the one cargo built next to this program
//! (`--lib PATH` names another).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The headers, embedded so that the installer needs nothing but itself and the library.
const HEADERS: [(&str, &str); 4] = [
    ("ucc.h", include_str!("../../include/ucc/api/ucc.h")),
    ("ucc_def.h", include_str!("../../include/ucc/api/ucc_def.h")),
    ("ucc_status.h", include_str!("../../include/ucc/api/ucc_status.h")),
    ("ucc_version.h", include_str!("../../include/ucc/api/ucc_version.h")),
];

/// The library's soname (set in build.rs).
const SONAME: &str = "libucc.so.1";

/// The version installed (UCC's API version this library provides).
const VERSION: &str = "1.4.0";

fn pkg_config() -> String {
    // ${pcfiledir} keeps the prefix relocatable.
    format!(
        "prefix=${{pcfiledir}}/../..\nexec_prefix=${{prefix}}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\n\
         Name: ucc\nDescription: UCC's C interface over ferrocoll (collective communication)\nVersion: {VERSION}\n\
         Libs: -L${{libdir}} -lucc\nCflags: -I${{includedir}}\n"
    )
}

fn cmake_config() -> String {
    "# find_package(UCC): the imported target ucc::ucc, ferrocoll's libucc.so.1.\n\
     get_filename_component(_ucc_prefix \"${CMAKE_CURRENT_LIST_DIR}/../../..\" ABSOLUTE)\n\
     if(NOT TARGET ucc::ucc)\n\
     \x20 add_library(ucc::ucc SHARED IMPORTED)\n\
     \x20 set_target_properties(ucc::ucc PROPERTIES\n\
     \x20   IMPORTED_LOCATION \"${_ucc_prefix}/lib/libucc.so.1\"\n\
     \x20   IMPORTED_SONAME \"libucc.so.1\"\n\
     \x20   INTERFACE_INCLUDE_DIRECTORIES \"${_ucc_prefix}/include\")\n\
     endif()\n\
     set(UCC_INCLUDE_DIRS \"${_ucc_prefix}/include\")\n\
     set(UCC_LIBRARIES ucc::ucc)\n\
     unset(_ucc_prefix)\n"
        .to_string()
}

fn cmake_version() -> String {
    format!(
        "set(PACKAGE_VERSION \"{VERSION}\")\n\
         if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)\n\
         \x20 set(PACKAGE_VERSION_COMPATIBLE FALSE)\n\
         else()\n\
         \x20 set(PACKAGE_VERSION_COMPATIBLE TRUE)\n\
         \x20 if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)\n\
         \x20   set(PACKAGE_VERSION_EXACT TRUE)\n\
         \x20 endif()\n\
         endif()\n"
    )
}

/// The library cargo built with this program: the newer of the profile
/// directory's copy (`cargo build`) and `deps/` (where `cargo run`, which
/// builds the package's library before its programs, leaves it).
fn default_lib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("libucc.so"), dir.join("deps/libucc.so")]
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn install(prefix: &Path, lib: &Path) -> Result<(), String> {
    let (libdir, incdir) = (prefix.join("lib"), prefix.join("include/ucc/api"));
    let (pcdir, cmakedir) = (libdir.join("pkgconfig"), libdir.join("cmake/ucc"));
    for d in [&libdir, &incdir, &pcdir, &cmakedir] {
        std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let real = libdir.join(SONAME);
    // Replace, not overwrite in place: a running program may have the old file mapped.
    let tmp = libdir.join(format!(".{}.new", SONAME));
    std::fs::copy(lib, &tmp).map_err(|e| format!("copying {} to {}: {e}", lib.display(), tmp.display()))?;
    std::fs::rename(&tmp, &real).map_err(|e| format!("renaming to {}: {e}", real.display()))?;
    let link = libdir.join("libucc.so");
    if link.symlink_metadata().is_ok() {
        std::fs::remove_file(&link).map_err(|e| format!("replacing {}: {e}", link.display()))?;
    }
    std::os::unix::fs::symlink(SONAME, &link).map_err(|e| format!("linking {}: {e}", link.display()))?;
    for (name, text) in HEADERS {
        write(&incdir.join(name), text)?;
    }
    write(&pcdir.join("ucc.pc"), &pkg_config())?;
    write(&cmakedir.join("ucc-config.cmake"), &cmake_config())?;
    write(&cmakedir.join("ucc-config-version.cmake"), &cmake_version())?;
    Ok(())
}

const USAGE: &str = "usage: ferrocoll-ucc-install --prefix DIR [--lib PATH/libucc.so]";

/// A mistake in the options: the usage on stderr, exit status 2.
fn usage() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut prefix, mut lib) = (None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--prefix" => prefix = args.next().map(PathBuf::from),
            "--lib" => lib = args.next().map(PathBuf::from),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => return usage(),
        }
    }
    let Some(prefix) = prefix else { return usage() };
    let Some(lib) = lib.or_else(default_lib) else {
        eprintln!(
            "ferrocoll-ucc-install: no libucc.so beside this program; build it (cargo build -p ferrocoll-capi) or pass --lib"
        );
        return ExitCode::FAILURE;
    };
    match install(&prefix, &lib) {
        Ok(()) => {
            println!("installed {} as {}", lib.display(), prefix.join("lib").join(SONAME).display());
            println!("run UCC programs on ferrocoll with LD_LIBRARY_PATH={}", prefix.join("lib").display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ferrocoll-ucc-install: {e}");
            ExitCode::FAILURE
        }
    }
}
