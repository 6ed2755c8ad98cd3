//! Gives the cdylib UCC's soname, so that programs linked against it (or
//! against UCC) load it as `libucc.so.1`.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libucc.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
