//! The `bitparity` command line: the application layer (`bitparity::app`)
//! is the whole of it.

fn main() -> std::process::ExitCode {
    bitparity::app::main()
}
