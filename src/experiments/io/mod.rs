//! Storage experiments.

pub mod api;
pub mod atime;
pub mod burst;
pub mod cache;
pub mod device_read;
pub mod file_read;
pub mod metadata;
pub mod pregrow;
pub mod random;
pub mod record_size;
pub mod stream;

use crate::engine::Experiment;

pub fn all() -> Vec<Box<dyn Experiment>> {
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
