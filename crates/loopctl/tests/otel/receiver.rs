//! An in-test OTLP/HTTP receiver: tiny_http on a free port, `/v1/traces` bodies decoded with
//! opentelemetry-proto's generated types. Optionally slow (answers after a delay).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

#[derive(Debug, Clone)]
pub struct Received {
    pub span: Span,
    pub resource: HashMap<String, String>,
    pub headers: HashMap<String, String>,
}

pub struct Receiver {
    pub base: String,
    got: Arc<Mutex<Vec<Received>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    _server: Arc<tiny_http::Server>,
}

pub fn text(v: &Option<AnyValue>) -> Option<String> {
    match v.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        any_value::Value::DoubleValue(d) => Some(d.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

pub fn attrs(kvs: &[KeyValue]) -> HashMap<String, String> {
    kvs.iter()
        .filter_map(|kv| Some((kv.key.clone(), text(&kv.value)?)))
        .collect()
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::with_delay(Duration::ZERO)
    }

    pub fn with_delay(delay: Duration) -> Receiver {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let port = server.server_addr().to_ip().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let metrics = Arc::new(Mutex::new(Vec::new()));
        let (s, g, m) = (server.clone(), got.clone(), metrics.clone());
        std::thread::spawn(move || {
            for mut req in s.incoming_requests() {
                let mut body = Vec::new();
                let _ = req.as_reader().read_to_end(&mut body);
                let headers: HashMap<String, String> = req
                    .headers()
                    .iter()
                    .map(|h| (h.field.to_string().to_lowercase(), h.value.to_string()))
                    .collect();
                if req.url() == "/v1/metrics" {
                    let r = ExportMetricsServiceRequest::decode(body.as_slice())
                        .expect("a protobuf ExportMetricsServiceRequest");
                    m.lock().unwrap().push(r);
                }
                if req.url() == "/v1/traces" {
                    let r = ExportTraceServiceRequest::decode(body.as_slice())
                        .expect("a protobuf ExportTraceServiceRequest");
                    let mut out = g.lock().unwrap();
                    for rs in r.resource_spans {
                        let resource = rs
                            .resource
                            .map(|r| attrs(&r.attributes))
                            .unwrap_or_default();
                        for ss in rs.scope_spans {
                            for span in ss.spans {
                                out.push(Received {
                                    span,
                                    resource: resource.clone(),
                                    headers: headers.clone(),
                                });
                            }
                        }
                    }
                }
                std::thread::sleep(delay);
                let ct = tiny_http::Header::from_bytes("Content-Type", "application/x-protobuf")
                    .unwrap();
                let _ = req.respond(tiny_http::Response::from_data(Vec::new()).with_header(ct));
            }
        });
        Receiver {
            base: format!("http://127.0.0.1:{port}"),
            got,
            metrics,
            _server: server,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// The metric requests received, in order.
    pub fn metrics(&self) -> Vec<ExportMetricsServiceRequest> {
        self.metrics.lock().unwrap().clone()
    }

    pub fn spans(&self) -> Vec<Span> {
        self.received().into_iter().map(|r| r.span).collect()
    }
}
