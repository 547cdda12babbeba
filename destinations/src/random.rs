//! Random identifiers (`ch_…`, `re_…`, `evt_…`) from the operating system's random source.

use std::io::Read;

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `prefix` followed by 24 random letters and digits.
pub(crate) fn id(prefix: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + 24);
    id.push_str(prefix);
    let mut source = std::fs::File::open("/dev/urandom").expect("/dev/urandom opens");
    while id.len() < prefix.len() + 24 {
        let mut bytes = [0_u8; 32];
        source
            .read_exact(&mut bytes)
            .expect("the operating system's random source is readable");
        // 248 is the largest multiple of 62 below 256: no letter is likelier than another.
        for byte in bytes.into_iter().filter(|&b| b < 248) {
            if id.len() < prefix.len() + 24 {
                id.push(char::from(ALPHABET[usize::from(byte % 62)]));
            }
        }
    }
    id
}
