// OnceGate for Logic Apps (Consumption), stage one: the custom connector, deployed with the app
// (docs/deploy.md, "Logic Apps in one step"). Its connection and the sample workflow are stage two,
// app/logicapps-connection.bicep, deployed after the code is published (azure.yaml's postdeploy hook,
// tools/logicapps_connection.py): a function key can be read only from a running host, and a connection
// redeployed with the infrastructure would lose the key it was given. Power Automate connectors live in
// Dataverse, not in Azure: they are imported with `pac connector create` (connector/README.md).
//
// One copy of everything: the connector is the generated definition under connector/ (key or Entra
// variant, following authMode) with its host set to this app. loadJsonContent, not loadTextContent: a
// definition is about 140,000 characters, over loadTextContent's limit of 131,072 and well under
// loadJsonContent's 1,048,576.

@description('Region of the connector, the connection and the workflow.')
param location string

@description('Tags of every resource.')
param tags object

@description('Unique token of the deployment: part of every name.')
param resourceToken string

@description('Name of the OnceGate function app the connector calls.')
param functionAppName string

@allowed([
  'key'
  'entra'
])
@description('ONCEGATE_AUTH of the function app: key (the connector\'s function key variant) or entra (its Microsoft Entra ID variant).')
param authMode string

@description('Entra mode: application (client) ID of the OnceGate API app registration; the connection asks for a token for api://<this ID>.')
param entraClientId string

@description('Entra mode: application (client) ID of the connector\'s app registration, the one people sign the connection in with.')
param connectorClientId string

@secure()
@description('Entra mode: a client secret of the connector\'s app registration.')
param connectorClientSecret string

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

var functionAppHost = functionApp.properties.defaultHostName
var tenantId = tenant().tenantId
// The sign-in host of the cloud deployed to (login.microsoftonline.com in the public cloud), without the
// trailing '/' environment() gives it.
var loginEndpoint = environment().authentication.loginEndpoint
var loginUri = endsWith(loginEndpoint, '/') ? substring(loginEndpoint, 0, length(loginEndpoint) - 1) : loginEndpoint
var keyDefinition = loadJsonContent('../../connector/apiDefinition.swagger.json')
var entraDefinition = loadJsonContent('../../connector/entra/apiDefinition.swagger.json')
var definition = authMode == 'entra' ? entraDefinition : keyDefinition
// The connection parameter that carries each definition's security, named as the connector platform
// names it: api_key for the key variant's apiKey scheme (the x-functions-key header), token for OAuth.
var keyConnectionParameters = {
  api_key: {
    type: 'securestring'
  }
}
var entraConnectionParameters = {
  token: {
    type: 'oauthSetting'
    oAuthSettings: {
      identityProvider: 'aad'
      clientId: connectorClientId
      clientSecret: connectorClientSecret
      scopes: []
      properties: {
        IsFirstParty: 'False'
      }
      customParameters: {
        loginUri: {
          value: loginUri
        }
        tenantId: {
          value: tenantId
        }
        resourceUri: {
          value: 'api://${entraClientId}'
        }
      }
    }
  }
}

// Entra mode needs the connector's app registration: these stop the deployment without it, before the
// connector is written (core/required.bicep).
module connectorClientIdRequired '../core/required.bicep' = if (authMode == 'entra') {
  name: 'logicapps-entra-needs-logicAppsConnectorClientId'
  params: {
    value: connectorClientId
  }
}

module connectorClientSecretRequired '../core/required.bicep' = if (authMode == 'entra') {
  name: 'logicapps-entra-needs-logicAppsConnectorClientSecret'
  params: {
    value: connectorClientSecret
  }
}

resource connector 'Microsoft.Web/customApis@2016-06-01' = {
  name: 'oncegate-${resourceToken}'
  location: location
  tags: tags
  properties: {
    displayName: definition.info.title
    description: definition.info.description
    apiType: 'Rest'
    brandColor: loadJsonContent('../../connector/apiProperties.json', '$.properties.iconBrandColor')
    capabilities: []
    backendService: {
      serviceUrl: 'https://${functionAppHost}'
    }
    swagger: union(definition, { host: functionAppHost })
    connectionParameters: authMode == 'entra' ? entraConnectionParameters : keyConnectionParameters
  }
  dependsOn: [
    connectorClientIdRequired
    connectorClientSecretRequired
  ]
}

@description('Name of the custom connector (Microsoft.Web/customApis); its connection, deployed by stage two, has the same name.')
output connectorName string = connector.name
