//! A deliberately small HTTP/1.1 client over `TcpStream`: one request per connection, so a
//! connection closed without a status line is seen as exactly that.

use std::io;
use std::net::SocketAddr;

use destinations::protocol::DeliveryRequest;
use destinations::{Config, Kind, RunningDestination};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What came back on a connection.
#[derive(Debug)]
pub enum Reply {
    /// A complete response.
    Response(Response),
    /// The connection closed before a single response byte arrived.
    ClosedWithoutResponse,
}

impl Reply {
    pub fn response(self) -> Response {
        match self {
            Reply::Response(response) => response,
            Reply::ClosedWithoutResponse => panic!("the connection closed without a response"),
        }
    }
}

/// A response's status and JSON body (`Value::Null` when empty), its headers (names in
/// lowercase) and the body's exact text.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Value,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Response {
    /// The body as `T`.
    pub fn json<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.body.clone())
            .unwrap_or_else(|error| panic!("unexpected body {}: {error}", self.body))
    }

    /// The body's `code`, for problem answers.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or_default()
    }

    /// The value of the header `name` (lowercase), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(sent, _)| sent == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Talks to one destination; holds its control token for the test-only endpoints.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    addr: SocketAddr,
    authorization: &'static str,
}

impl Client {
    pub fn new(destination: &RunningDestination) -> Self {
        Client {
            addr: destination.addr(),
            // Leaked so the client stays `Copy` for tests that hand it to many tasks; a test
            // starts few destinations.
            authorization: String::leak(format!("Bearer {}", destination.control_token().expose())),
        }
    }

    /// Calls a test-only endpoint (`/control/…`, `/ledger`) with the control token.
    pub async fn control(&self, method: &str, path: &str, body: &str) -> Reply {
        let headers = [("Authorization", self.authorization)];
        self.send(method, path, &headers, body).await
    }

    /// Sends `body` declared as `content_type` instead of JSON.
    pub async fn send_as(&self, method: &str, path: &str, content_type: &str, body: &str) -> Reply {
        self.try_send(method, path, content_type, &[], body)
            .await
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"))
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, &[], "").await
    }

    pub async fn deliver(&self, key: Option<&str>, request: &DeliveryRequest) -> Reply {
        let body = serde_json::to_string(request).unwrap();
        let headers: Vec<_> = key
            .map(|key| ("Idempotency-Key", key))
            .into_iter()
            .collect();
        self.send("POST", "/deliveries", &headers, &body).await
    }

    pub async fn look_up(&self, client_reference: &str, digest: Option<&str>) -> Reply {
        let mut path = format!("/deliveries/by-reference/{}", encode(client_reference));
        if let Some(digest) = digest {
            path += &format!("?digest={digest}");
        }
        self.get(&path).await
    }

    pub async fn withdraw(&self, external_reference: &str, key: Option<&str>) -> Reply {
        let path = format!("/deliveries/{external_reference}/withdrawal");
        let headers: Vec<_> = key
            .map(|key| ("Idempotency-Key", key))
            .into_iter()
            .collect();
        self.send("POST", &path, &headers, "").await
    }

    /// Sends `body` declared as `content_type`, with `headers`.
    pub async fn send_with(
        &self,
        (method, path): (&str, &str),
        content_type: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let body = std::str::from_utf8(body).expect("a UTF-8 body");
        self.try_send(method, path, content_type, headers, body)
            .await
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"))
    }

    /// Sends one request and reads until the server closes the connection.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        self.try_send(method, path, "application/json", headers, body)
            .await
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"))
    }

    async fn try_send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> io::Result<Reply> {
        let mut stream = TcpStream::connect(self.addr).await?;
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Content-Type: {content_type}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (name, value) in headers {
            request += &format!("{name}: {value}\r\n");
        }
        request += "\r\n";
        request += body;
        stream.write_all(request.as_bytes()).await?;

        let mut received = Vec::new();
        match stream.read_to_end(&mut received).await {
            Ok(_) => {}
            // Closing a socket with unread data resets it: still no response.
            Err(error) if error.kind() == io::ErrorKind::ConnectionReset && received.is_empty() => {
            }
            Err(error) => return Err(error),
        }
        if received.is_empty() {
            return Ok(Reply::ClosedWithoutResponse);
        }
        Ok(Reply::Response(parse(&received)))
    }
}

fn parse(received: &[u8]) -> Response {
    let text = std::str::from_utf8(received).expect("a UTF-8 response");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .expect("a complete response head");
    let status_line = head.lines().next().unwrap();
    assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "this client reads only bodies of known length"
    );
    let status = status_line[9..12].parse().unwrap();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
    };
    Response {
        status,
        body: json,
        headers,
        text: body.to_owned(),
    }
}

/// Percent-encodes a path segment.
pub fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `sha256:` and the hex digest of `input`.
pub fn digest(input: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(input)))
}

/// A valid delivery request whose digest is that of `input`.
pub fn delivery(client_reference: &str, input: &str) -> DeliveryRequest {
    DeliveryRequest {
        client_reference: client_reference.to_owned(),
        digest: digest(input),
        recipient: "ada@example.org".to_owned(),
        summary: format!("document for {client_reference}"),
    }
}

/// A destination of `kind` with the default configuration, and a client for it.
pub async fn start(pool: PgPool, kind: Kind) -> (RunningDestination, Client) {
    start_with(pool, Config::new(kind)).await
}

/// A destination with `config`, and a client for it.
pub async fn start_with(pool: PgPool, config: Config) -> (RunningDestination, Client) {
    let destination = destinations::spawn(pool, config).await.unwrap();
    let client = Client::new(&destination);
    (destination, client)
}
