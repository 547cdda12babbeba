-- The synthetic destinations are a separate durable system. They may share a PostgreSQL
-- database with Z29C during development, so everything they own lives in this schema.
create schema destination;
