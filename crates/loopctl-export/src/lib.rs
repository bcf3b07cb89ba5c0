//! loopctl's metrics: the event log folded into Prometheus series ([`model`], pure; [`feed`],
//! lines into the model), encoded at the edge ([`encode`]), written as a node_exporter textfile
//! ([`textfile`]) or served over HTTP while the logs are followed ([`serve`]).

pub mod encode;
pub mod feed;
pub mod model;
pub mod otel;
pub mod serve;
pub mod textfile;

pub use model::{MetricState, Options};
