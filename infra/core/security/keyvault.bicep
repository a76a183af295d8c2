// The Key Vault holding OnceGate's HMAC key secret. Access is by Azure RBAC only (no access
// policies); the app reads the secret through a Key Vault reference with its user-assigned identity.

@minLength(3)
@maxLength(24)
@description('Name of the Key Vault: 3-24 letters, digits and hyphens, unique in Azure.')
param name string

@description('Region of the Key Vault.')
param location string

@description('Tags of the Key Vault.')
param tags object

@description('Name of the secret holding ONCEGATE_KEY_SECRET.')
#disable-next-line secure-secrets-in-params // the secret's name, not its value
param keySecretName string

@secure()
@minLength(32)
@description('Value of the HMAC key secret, at least 32 characters.')
param keySecret string

@description('Purge protection; irreversible once on.')
param enablePurgeProtection bool

@minValue(7)
@maxValue(90)
@description('Days a deleted vault or secret stays recoverable.')
param softDeleteRetentionInDays int

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: softDeleteRetentionInDays
    // The service takes true or nothing: "the property does not accept false as its value".
    enablePurgeProtection: enablePurgeProtection ? true : null
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

resource keySecretEntry 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: keyVault
  name: keySecretName
  properties: {
    value: keySecret
    contentType: 'text/plain'
  }
}

@description('Name of the Key Vault.')
output name string = keyVault.name

@description('Versionless URI of the key secret, for the app setting\'s Key Vault reference (the app follows the latest version).')
output keySecretUri string = keySecretEntry.properties.secretUri
