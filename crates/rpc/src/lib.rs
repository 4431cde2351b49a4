//! The loomfs transport: framed, multiplexed requests over TCP.
//!
//! - [`auth`]: the shared-key challenge-response that opens every connection.
//! - [`conn`]: reading and writing whole frames on a stream.
//! - [`outbox`]: the sending side of a connection: frames written by their
//!   sender's own thread when the socket takes them, by a writer task when
//!   it does not.
//! - [`server`]: the accept loop; each request runs as its own task, so one
//!   slow request never holds up the others on its connection.
//! - [`callback`]: calls from a server to a client on the client's own
//!   connection (lease recalls).
//! - [`fail`]: wire corruption for tests.
//! - [`client`]: one connection per server, many requests in flight,
//!   timeouts, reconnect and resend until a deadline.
#![warn(missing_docs)]

pub mod auth;
pub mod callback;
pub mod client;
pub mod conn;
pub mod fail;
pub mod outbox;
pub mod server;

pub use auth::{ClusterKey, Standing};
pub use callback::{CallbackHandler, Channel};
pub use client::{ClientOptions, Replied, RpcClient, RpcError, RpcStats};
pub use conn::Bulk;
pub use server::{serve, Answer, Service};
