//! OpenTelemetry: runs as OTLP traces. `model` folds a log into spans (pure), `ids` derives
//! their ids from the log, `config` reads the standard OTEL_* settings, `send` hands spans to
//! the OTLP/HTTP exporter, and `live` feeds the runner's events through the same model.

pub mod config;
pub mod ids;
pub mod live;
pub mod metrics;
pub mod model;
pub mod replay;
pub mod send;

pub use config::Config;
pub use live::Live;
pub use model::{OtelRuns, RunSpans, Span};
pub use send::{SendError, Sender};
