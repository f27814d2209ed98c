-- 1100 alphanumeric CNPJ (issue 27): since July 2026 a CNPJ is 12 characters of 0-9A-Z and 2 check
-- digits. The CHECKs that held documents to 11 or 14 digits accept the new form too (numeric CNPJs
-- are its special case; stored documents are unchanged). The check digits are the edge's rule
-- (src/lib/documents.ts); the database keeps the shape.
ALTER TABLE merchants DROP CONSTRAINT merchants_document_check;
ALTER TABLE merchants ADD CONSTRAINT merchants_document_check
  CHECK (document ~ '^([0-9]{11}|[0-9A-Z]{12}[0-9]{2})$');
ALTER TABLE boletos DROP CONSTRAINT boletos_payer_document_check;
ALTER TABLE boletos ADD CONSTRAINT boletos_payer_document_check
  CHECK (payer_document ~ '^([0-9]{11}|[0-9A-Z]{12}[0-9]{2})$');
ALTER TABLE pix_charges DROP CONSTRAINT pix_charges_payer_document_check;
ALTER TABLE pix_charges ADD CONSTRAINT pix_charges_payer_document_check
  CHECK (payer_document ~ '^([0-9]{11}|[0-9A-Z]{12}[0-9]{2})$');
