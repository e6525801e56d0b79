//! Storage experiments.

pub(crate) mod api;
pub(crate) mod atime;
pub(crate) mod burst;
pub(crate) mod cache;
pub(crate) mod device_read;
pub(crate) mod file_read;
pub(crate) mod metadata;
pub(crate) mod pregrow;
pub(crate) mod random;
pub(crate) mod record_size;
pub(crate) mod stream;

use crate::engine::Experiment;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(file_read::FileRead),
        Box::new(record_size::RecordSize),
        Box::new(api::Api),
        Box::new(pregrow::Pregrow),
        Box::new(metadata::Metadata),
        Box::new(cache::Cache),
        Box::new(device_read::DeviceRead),
        Box::new(atime::Atime),
        Box::new(stream::Stream::default()),
        Box::new(burst::Burst::default()),
        Box::new(random::Random::default()),
    ]
}
