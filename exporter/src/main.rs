//! `nfsdtopd`: see the crate docs and `nfsdtopd --help`.

fn main() -> std::process::ExitCode {
    nfsdtop_exporter::daemon::main()
}
