//! How a service reaches other targets: the cluster configuration from the
//! MGS and one RPC client per server address.

use loom_proto::msg::{ClusterConfig, Envelope, Reply, ReqCtx, Request, TargetId};
use loom_proto::{Errno, WireError};
use loom_rpc::{ClientOptions, ClusterKey, RpcClient};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Configuration older than this is fetched again before use.
const CONFIG_MAX_AGE: Duration = Duration::from_secs(2);

/// A service's view of the rest of the cluster.
pub struct Peers {
    mgs: Arc<RpcClient>,
    key: ClusterKey,
    opts: ClientOptions,
    clients: Mutex<HashMap<String, Arc<RpcClient>>>,
    config: Mutex<(ClusterConfig, Option<Instant>)>,
    ctx: ReqCtx,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Peers {
    /// Peers reached through the MGS at `mgs_addr`.
    pub fn new(mgs_addr: &str, key: ClusterKey, opts: ClientOptions) -> Peers {
        Peers {
            mgs: Arc::new(RpcClient::new(mgs_addr, key.clone(), opts.clone())),
            key,
            opts,
            clients: Mutex::new(HashMap::new()),
            config: Mutex::new((ClusterConfig::default(), None)),
            ctx: ReqCtx {
                client_id: rand::random(),
                ..ReqCtx::default()
            },
        }
    }

    /// Send a request to the MGS.
    pub async fn call_mgs(&self, req: Request) -> Result<Reply, WireError> {
        let env = Envelope {
            target: TargetId::MGS,
            ctx: self.ctx.clone(),
            req,
        };
        Ok(self.mgs.call(&env, &[]).await?.0)
    }

    /// The configuration, fetched again if older than a couple of seconds.
    pub async fn config(&self) -> Result<ClusterConfig, WireError> {
        {
            let g = lock(&self.config);
            if let Some(t) = g.1 {
                if t.elapsed() < CONFIG_MAX_AGE {
                    return Ok(g.0.clone());
                }
            }
        }
        self.refresh().await
    }

    /// Fetch the configuration from the MGS now.
    pub async fn refresh(&self) -> Result<ClusterConfig, WireError> {
        match self.call_mgs(Request::GetConfig).await? {
            Reply::Config(c) => {
                *lock(&self.config) = (c.clone(), Some(Instant::now()));
                Ok(c)
            }
            other => Err(WireError::new(
                Errno::EPROTO,
                format!("MGS answered GetConfig with {other:?}"),
            )),
        }
    }

    /// Send a request (with bulk) to `target`, with a deadline.
    pub async fn call(
        &self,
        target: TargetId,
        req: Request,
        bulk: &[u8],
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), WireError> {
        let cfg = self.config().await?;
        let addr = cfg
            .target(target)
            .map(|t| t.addr.clone())
            .ok_or_else(|| WireError::new(Errno::EIO, format!("{target} is not registered")))?;
        let client = {
            let mut m = lock(&self.clients);
            m.entry(addr.clone())
                .or_insert_with(|| {
                    Arc::new(RpcClient::new(
                        addr.clone(),
                        self.key.clone(),
                        self.opts.clone(),
                    ))
                })
                .clone()
        };
        let env = Envelope {
            target,
            ctx: self.ctx.clone(),
            req,
        };
        Ok(client.call_with_timeout(&env, bulk, timeout).await?)
    }
}
